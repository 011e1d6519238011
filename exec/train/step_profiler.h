#pragma once
// StepProfiler — `quintnet-train --profile DIR`: LibTorch's profiler (Kineto: the CPU's
// ops, and where the build has CUDA the GPU's kernels and copies) over a few steps from
// the second on (the first warms up), written per rank as
//   DIR/trace.rankR.json  the profiler's Chrome trace (Perfetto, chrome://tracing), in
//                          which the schedule's actions ("F3", "BW0", "SEND_ACT(...)",
//                          named as in QuintNet's own trace) frame the ops they ran;
//   DIR/ops.rankR.tsv     per op and device: calls and self time per step, and its share;
// and rank 0 prints the top of its table.  Self time: an op's time less the ops it
// called (on the thread that ran it); a GPU kernel's time is its own.
//
// `--nvtx` (CUDA builds): every op and action is also an NVTX range, for Nsight Systems.
#include <torch/torch.h>

#include <memory>
#include <string>
#include <vector>

namespace quintnet::exec {

class StepProfiler {
 public:
  // dir empty: off.  steps: how many, from the second step on (the first of a one-step run).
  StepProfiler(std::string dir, int steps, long total_steps, int rank, bool cuda);
  void begin_step(long step);  // starts before the first profiled step
  // After a step: stops after the last profiled one (or the run's last, `last`) and
  // writes the files; returns the top of the table, empty where nothing was written.
  std::string end_step(long step, bool last);

  // One line per op of a profile, most self time first (the table's rows).
  struct Row {
    std::string name, device;
    double calls_per_step = 0, self_ms_per_step = 0, share = 0;  // share of the device's self time
  };

 private:
  std::string stop_and_write();

  std::string dir_;
  long first_, end_;  // profiled steps: [first_, end_)
  int rank_;
  bool cuda_;
  bool running_ = false;
  int profiled_ = 0;  // steps profiled so far
};

// NVTX ranges for every op and action (RecordFunction), for the whole run: for Nsight
// Systems.  A clear error where LibTorch was built without CUDA.
void enable_nvtx_ranges();

}  // namespace quintnet::exec
