#pragma once
// The op-shape probe: what this rank's forward and backward ops cost on their own, at
// two micro-batch sizes, so the simulator can tell an op's fixed cost per layer (kernel
// dispatch, allocation: LibTorch on a CPU, launches on a GPU) from the part that grows
// with the micro-batch, and knows both without the contention of a busy machine.  One
// training run alone cannot: all its ops have one shape, and on a shared CPU each ran
// beside a varying number of others.
//
// After the traced steps each rank times its stage's forward (with the loss on the last
// stage) and backward, in turn at the run's micro-batch b, b/2 and b/4, on stand-in
// inputs — with tensor parallelism also a freshly built unsharded copy of its blocks,
// what they cost at tp 1 —, without the pipeline: no messages, gradients discarded, no data-parallel
// all-reduce.  The tensor-parallel all-reduces inside the ops run (the tp group probes
// together) and are subtracted, as the calibration does for training ops.  On a CPU the
// tp groups take turns while the others wait, so each op has the cores to itself (the
// unsharded copies one rank at a time); on GPUs every rank probes at once.  Rank 0 writes what each rank measured into the trace
// (otherData.platform.op_probe), where `quintnet calibrate` reads it.
#include <vector>

#include <nlohmann/json.hpp>
#include <torch/torch.h>

#include "exec/comm/communicator.h"
#include "exec/parallel/strategy.h"

namespace quintnet::exec {

struct ProbeShape {
  int64_t tokens = 0, hidden = 0;  // the activations between stages: [b, tokens, hidden]
  bool bf16 = false;               // forward under autocast, as training runs it
};

// Collective over all ranks; `inputs`/`labels`: one training microbatch of b >= 2
// samples.  Returns, on rank 0, one entry per rank (seconds per op at each size, the
// median over the repetitions, summed over the rank's chunks):
//   {"rank": r, "solo": bool, "micro_batch": [b, b/2, b/4], "tp": t, "forward_s": [..], "backward_s": [..],
//    "forward_no_graph_s": f,                              (at b, under NoGradGuard)
//    "tp1": {"forward_s": [..], "backward_s": [..], ...}}  (tp1: the same blocks unsharded, when t > 1)
// elsewhere null.  Needs the communicator's tracer (to subtract the tp all-reduces);
// leaves it inactive and the gradients zero.
nlohmann::json probe_op_shapes(ParallelModel& model, Communicator& comm, const torch::Tensor& inputs,
                               const torch::Tensor& labels, const ProbeShape& shape);

}  // namespace quintnet::exec
