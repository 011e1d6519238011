#include "exec/train/op_probe.h"

#include "core/trace_analysis.h"
#include "exec/trace/trace_recorder.h"
#include "exec/precision/autocast.h"

namespace quintnet::exec {
namespace {

using Clock = TraceRecorder::Clock;
constexpr int kProbeStep = -1;   // a step number no training step has
constexpr int kRepetitions = 7;  // of each size

// Seconds of the forward and the backward ops in `events`, less the tensor-parallel
// all-reduces nested in them.
std::pair<double, double> op_seconds(const std::vector<core::TraceEvent>& events) {
  double forward = 0, backward = 0;
  for (const auto& e : events) {
    if (e.lane != core::Lane::Compute) continue;
    double inside = 0;
    for (const auto& o : events)
      if (o.lane == core::Lane::TpCollective && o.ts_us >= e.ts_us && o.end_us() <= e.end_us()) inside += o.dur_us;
    (e.kind == "forward" ? forward : backward) += (e.dur_us - inside) * 1e-6;
  }
  return {forward, backward};
}

// A stage to time: one of the rank's chunks, or an unsharded copy of one.
struct ProbeStage {
  std::shared_ptr<StageModel> model;
  bool first = false, last = false;
  ModelChunk* chunk = nullptr;  // the training chunk (its gradients live in flat buffers)
};

// One forward and one backward of every stage on `b` samples, recorded as probe-step
// events.
void run_ops(std::vector<ProbeStage>& stages, TraceRecorder& tracer, const torch::Tensor& inputs,
             const torch::Tensor& labels, int64_t b, const ProbeShape& shape) {
  for (ProbeStage& stage : stages) {
    if (stage.chunk && stage.chunk->dp) stage.chunk->dp->sync_next_backward(false);  // the dp peers are not probing
    torch::Tensor x = stage.first ? inputs.narrow(0, 0, b)
                                  : torch::randn({b, shape.tokens, shape.hidden}, inputs.options().dtype(torch::kFloat32))
                                        .requires_grad_(true);
    auto start = Clock::now();
    torch::Tensor out;
    {
      AutocastScope autocast(shape.bf16, x.device());
      out = stage.model->forward(x).to(torch::kFloat32);
    }
    if (stage.last) out = stage.model->loss(out, labels.narrow(0, 0, b)).loss;
    tracer.event(core::Lane::Compute, "forward", "probe F", start, Clock::now());
    const torch::Tensor grad = stage.last ? torch::Tensor() : torch::randn_like(out);
    start = Clock::now();
    if (stage.last) out.backward();
    else out.backward(grad);
    tracer.event(core::Lane::Compute, "backward", "probe B", start, Clock::now());
    if (stage.chunk) stage.chunk->flat->zero_grad();
    else stage.model->zero_grad();
  }
}

// Seconds of one forward of every stage on `b` samples without recording a graph, as
// full recomputation's forward runs its blocks (the tensor-parallel all-reduces inside
// included: those are few next to the ops on the probed sizes).
double no_graph_forward_seconds(std::vector<ProbeStage>& stages, const torch::Tensor& inputs, int64_t b,
                                const ProbeShape& shape) {
  torch::NoGradGuard no_graph;
  const auto start = Clock::now();
  for (ProbeStage& stage : stages) {
    const torch::Tensor x = stage.first ? inputs.narrow(0, 0, b)
                                        : torch::randn({b, shape.tokens, shape.hidden}, inputs.options().dtype(torch::kFloat32));
    AutocastScope autocast(shape.bf16, x.device());
    stage.model->forward(x);
  }
  return std::chrono::duration<double>(Clock::now() - start).count();
}

// Forward and backward seconds of `stages` at each size: the median over the
// repetitions (a busy machine's outliers aside) after one warm-up round, the sizes
// taking turns so drift hits them alike.
nlohmann::json time_stages(std::vector<ProbeStage>& stages, TraceRecorder& tracer, const torch::Tensor& inputs,
                           const torch::Tensor& labels, const std::vector<int64_t>& sizes, const ProbeShape& shape) {
  std::vector<std::vector<double>> forward(sizes.size()), backward(sizes.size());
  std::vector<double> no_graph;  // at the largest size
  for (int rep = 0; rep <= kRepetitions; ++rep) {
    for (size_t k = 0; k < sizes.size(); ++k) {
      tracer.set_step(kProbeStep, true);
      run_ops(stages, tracer, inputs, labels, sizes[k], shape);
      tracer.set_step(kProbeStep, false);
      const auto [f, bw] = op_seconds(tracer.take_step(kProbeStep));
      if (rep == 0) continue;
      forward[k].push_back(f);
      backward[k].push_back(bw);
    }
    const double f = no_graph_forward_seconds(stages, inputs, sizes[0], shape);
    if (rep > 0) no_graph.push_back(f);
  }
  nlohmann::json out = {{"forward_s", nlohmann::json::array()}, {"backward_s", nlohmann::json::array()},
                        {"forward_no_graph_s", core::median(no_graph)}};
  for (size_t k = 0; k < sizes.size(); ++k) {
    out["forward_s"].push_back(core::median(forward[k]));
    out["backward_s"].push_back(core::median(backward[k]));
  }
  return out;
}

}  // namespace

nlohmann::json probe_op_shapes(ParallelModel& model, Communicator& comm, const torch::Tensor& inputs,
                               const torch::Tensor& labels, const ProbeShape& shape) {
  TraceRecorder& tracer = *comm.tracer();
  // The run's micro-batch, its half and quarter (down to 1 sample).
  std::vector<int64_t> sizes;
  for (int64_t b = inputs.size(0); b >= 1 && sizes.size() < 3; b /= 2) sizes.push_back(b);
  std::vector<ProbeStage> sharded, unsharded;
  for (size_t c = 0; c < model.chunks.size(); ++c) {
    ModelChunk& chunk = model.chunks[c];
    const bool first = model.is_first(static_cast<int>(c)), last = model.is_last(static_cast<int>(c));
    sharded.push_back({chunk.model, first, last, &chunk});
    // With tensor parallelism, also the same blocks unsharded: what they cost at tp 1.
    if (model.tp.size() > 1) {
      auto copy = chunk.model->make_stage(TpContext{}, chunk.range);
      copy->to(inputs.device());
      unsharded.push_back({copy, first, last, nullptr});
    }
  }
  // Turns: one per tensor-parallel group (ranks with the same dp and pp coordinates) on
  // a CPU, where ranks share the cores; one for everybody on GPUs.
  const bool solo = !inputs.is_cuda();
  const core::Mesh& mesh = comm.mesh();
  const int me = mesh.coord(comm.rank(), core::Axis::Dp) * mesh.size(core::Axis::Pp) + mesh.coord(comm.rank(), core::Axis::Pp);
  const int turns = solo ? mesh.size(core::Axis::Dp) * mesh.size(core::Axis::Pp) : 1;
  nlohmann::json mine = {{"rank", comm.rank()}, {"solo", solo}, {"micro_batch", sizes},
                         {"tp", model.tp.size()}};
  for (int turn = 0; turn < turns; ++turn) {
    comm.barrier(comm.world());
    if (solo && turn != me) continue;
    mine.update(time_stages(sharded, tracer, inputs, labels, sizes, shape));
    // The unsharded copies need no partner: the group's members time theirs one after
    // the other, each alone on the machine as a tp 1 rank's probe is.
    if (!unsharded.empty())
      for (int member = 0; member < model.tp.size(); ++member) {
        comm.barrier(*model.tp.group);
        if (member == model.tp.rank()) mine["tp1"] = time_stages(unsharded, tracer, inputs, labels, sizes, shape);
      }
  }
  comm.barrier(comm.world());
  const std::vector<std::string> all = comm.gather_strings(mine.dump());
  if (comm.rank() != 0) return nullptr;
  nlohmann::json out = nlohmann::json::array();
  for (const std::string& s : all) out.push_back(nlohmann::json::parse(s));
  return out;
}

}  // namespace quintnet::exec
