#include "sim/planner.h"

#include <algorithm>
#include <cstdio>

#include "core/cost_model.h"
#include "core/error.h"
#include "core/schedule_validator.h"
#include "sim/child_process.h"
#include "sim/simulation.h"

namespace quintnet::sim {
namespace {

core::Plan plan_of(const PlanQuery& q, const Candidate& c) {
  core::Plan p;
  p.batch_size = q.global_batch;
  p.grad_acc_steps = c.microbatches;
  p.mesh_dim = {c.dp, c.tp, c.pp};
  if (c.cp > 1) {  // a fourth axis only where it is used: cp 1 plans stay the 3-D ones
    p.mesh_dim = {c.dp, c.cp, c.tp, c.pp};
    p.mesh_name = {core::Axis::Dp, core::Axis::Cp, core::Axis::Tp, core::Axis::Pp};
  }
  p.schedule = core::schedule_kind_name(c.schedule);
  p.virtual_stages = c.chunks;
  p.device_type = core::Device::Cuda;
  p.recompute = c.recompute;
  p.sequence_parallel = c.sequence_parallel;
  p.zero_stage = c.zero_stage;
  return p;
}

// A ring all-reduce of `bytes` over n ranks whose hops have latency a and bandwidth B.
double ring_time(double bytes, int n, double a, double b) { return n <= 1 ? 0.0 : 2.0 * (n - 1) * (a + bytes / (n * b)); }

std::string gib(double bytes) {
  char s[32];
  std::snprintf(s, sizeof(s), "%.1f GiB", bytes / (1024.0 * 1024 * 1024));
  return s;
}

// Analytic step: the slowest stage's op times plus its TP all-reduces, in core's
// schedule simulation; then the exposed DP gradient all-reduce (with ZeRO-1 its
// reduce-scatter and the parameters' all-gather: the same ring steps) and a tied head's
// all-reduce between the pipeline's ends.
double analytic_step(const StepCosts& s, const Candidate& c, const Platform& platform) {
  const bool tp_in_node = c.tp <= platform.gpus_per_node;
  const double hop_a = tp_in_node ? platform.intra_latency : platform.intra_latency + platform.inter_latency;
  const double tp_ring = ring_time(s.tp_allreduce_bytes, c.tp, hop_a, platform.intra_link_bandwidth());
  core::OpCosts costs;
  // Context parallelism: the ring's closed-form exposure (sim/cp_ring.h) on top of the ops.
  double ring_forward = 0, ring_backward = 0;
  for (const CpRingCosts& ring : s.cp_ring) {
    ring_forward = std::max(ring_forward, ring.estimate_forward_s);
    ring_backward = std::max(ring_backward, ring.estimate_backward_s);
  }
  costs.forward = *std::max_element(s.forward_s.begin(), s.forward_s.end()) + ring_forward +
                  c.chunks * s.tp_allreduces_per_op * tp_ring;
  costs.backward_input = *std::max_element(s.backward_input_s.begin(), s.backward_input_s.end()) + ring_backward +
                         c.chunks * (s.tp_allreduces_per_op + s.tp_allreduces_recompute) * tp_ring;
  costs.backward_weight = *std::max_element(s.backward_weight_s.begin(), s.backward_weight_s.end());
  const int replicas = c.dp * c.cp;  // the gradient all-reduce's ranks
  const bool pp_crosses_nodes = c.tp * replicas >= platform.gpus_per_node;
  const double pp_latency = pp_crosses_nodes ? platform.intra_latency + platform.inter_latency : platform.intra_latency;
  const double pp_bandwidth = pp_crosses_nodes ? platform.nic_link_bandwidth() : platform.intra_link_bandwidth();
  costs.p2p = pp_latency + s.p2p_bytes / pp_bandwidth;
  const bool dp_crosses_nodes = c.tp * replicas > platform.gpus_per_node;
  const double dp_bandwidth = dp_crosses_nodes ? platform.nic_link_bandwidth() : platform.intra_link_bandwidth();
  const double dp_latency = dp_crosses_nodes ? platform.inter_latency + platform.intra_latency : platform.intra_latency;
  const double grads = *std::max_element(s.dp_grad_bytes.begin(), s.dp_grad_bytes.end());
  // ZeRO-1: half the ring's steps reduce-scatter the gradients, half gather the weights
  // (bf16 under bf16 weights: fewer bytes than the gradients).
  const double gathered = *std::max_element(s.dp_gather_bytes.begin(), s.dp_gather_bytes.end());
  const double dp_sync = c.zero_stage >= 1 ? (ring_time(grads, replicas, dp_latency, dp_bandwidth) +
                                              ring_time(gathered, replicas, dp_latency, dp_bandwidth)) / 2
                                           : ring_time(grads, replicas, dp_latency, dp_bandwidth);
  // A tied head's copy of the embedding: its gradient all-reduced between the pipeline's ends.
  const double tied = s.tied_gradient_bytes > 0 ? ring_time(s.tied_gradient_bytes, std::min(c.pp, 2), pp_latency, pp_bandwidth) : 0.0;
  return core::simulate_schedule(s.schedule, costs).step_time + dp_sync + tied + s.optimizer_s;
}

// The layout `base` with its fastest memory options that fit, or rejected with the least
// memory any of them needs.  Recomputation is tried from none to full (each level costs
// time); at the first level where something fits, the set with the least memory is
// taken: sequence parallelism and ZeRO-1 save memory at no analytic cost (a ring
// all-reduce's steps are a reduce-scatter's and an all-gather's).
Candidate best_memory_options(const PlanQuery& q, const Candidate& base, const Platform& platform) {
  Candidate smallest = base;
  smallest.memory_bytes = 1e300;
  for (core::Recompute recompute : q.recompute) {
    Candidate best;
    bool found = false;
    for (bool sp : q.sequence_parallel)
      for (int zero : q.zero_stage) {
        if ((sp && base.tp < 2) || (zero > 0 && base.dp * base.cp < 2)) continue;
        Candidate c = base;
        c.recompute = recompute, c.sequence_parallel = sp, c.zero_stage = zero;
        const StepCosts s = candidate_step_costs(q, c, platform);
        c.memory_bytes = *std::max_element(s.memory_bytes.begin(), s.memory_bytes.end());
        if (c.memory_bytes < smallest.memory_bytes) smallest = c;
        const bool fits = platform.memory_bytes <= 0 || c.memory_bytes <= platform.memory_bytes;
        if (fits && (!found || c.memory_bytes < best.memory_bytes)) best = c, found = true;
      }
    if (found) {
      best.analytic_step_s = analytic_step(candidate_step_costs(q, best, platform), best, platform);
      return best;
    }
  }
  const std::string options = smallest.layout().substr(base.layout().size());  // ", recompute full, SP, ZeRO-1"
  smallest.rejected = "does not fit: " + gib(smallest.memory_bytes) + " per GPU" +
                      (options.empty() ? "" : " at the least (" + options.substr(2) + ")");
  return smallest;
}

}  // namespace

std::string Candidate::layout() const {
  char s[128];
  const std::string cp_axis = cp > 1 ? " x cp " + std::to_string(cp) : "";
  std::snprintf(s, sizeof(s), "dp %d%s x tp %d x pp %d, micro %d x %d, %s%s", dp, cp_axis.c_str(), tp, pp, micro_batch,
                microbatches, core::schedule_kind_name(schedule), chunks > 1 ? (" v" + std::to_string(chunks)).c_str() : "");
  std::string out = s;
  if (recompute != core::Recompute::None) out += ", recompute " + core::name_of(recompute);
  if (sequence_parallel) out += ", SP";
  if (zero_stage > 0) out += ", ZeRO-" + std::to_string(zero_stage);
  return out;
}

StepCosts candidate_step_costs(const PlanQuery& q, const Candidate& c, const Platform& platform) {
  return make_step_costs(simulated_layout(plan_of(q, c), q.model, q.seq), platform);
}

std::vector<Candidate> enumerate_layouts(const PlanQuery& q, const Platform& platform) {
  const core::ModelDims dims = core::model_dims(q.model);
  if (q.gpus > platform.gpus())
    throw core::UserError("--gpus " + std::to_string(q.gpus) + ": the platform has " + std::to_string(platform.gpus()) +
                          (platform.xml_file.empty() ? " (use --nodes)" : " (the hosts of " + platform.xml_file + ")"));
  // Context parallelism where the model can take it — causal attention (the ring's load
  // balancing) trained without dropout (the ring draws none; the GPT presets train with
  // 0.1, the Llama family without) — while each rank's chunks keep at least 512 tokens.
  const int seq = q.seq > 0 ? q.seq : dims.seq;
  std::vector<int> cps = {1};
  if (dims.causal && !dims.dropout)
    for (int cp = 2; seq % (2 * cp) == 0 && seq / (2 * cp) >= 512; cp *= 2) cps.push_back(cp);
  std::vector<Candidate> out;
  for (int cp : cps) {
    for (int tp = 1; tp <= q.gpus; tp *= 2)
      for (int pp = 1; tp * pp * cp <= q.gpus; ++pp) {
        if (q.gpus % (tp * pp * cp) != 0) continue;
        const int dp = q.gpus / (tp * pp * cp);
        for (int b : q.micro_batches)
          for (core::ScheduleKind schedule : q.schedules) {
            using core::ScheduleKind;
            Candidate c;
            c.dp = dp, c.tp = tp, c.pp = pp, c.cp = cp, c.micro_batch = b, c.schedule = schedule;
            c.chunks = schedule == ScheduleKind::Interleaved ? 2 : 1;
            if (schedule != ScheduleKind::OneFOneB && pp == 1) continue;  // one pipeline rank: 1F1B is all of them
            if (tp > platform.gpus_per_node) c.rejected = "tp larger than a node's GPUs (tensor parallelism needs NVLink)";
            else if (dims.heads % tp != 0) c.rejected = "tp does not divide the attention heads";
            else if (dims.layers < pp * c.chunks) c.rejected = "fewer layers than pipeline stages";
            else if (q.global_batch % (dp * b) != 0) c.rejected = "global batch not divisible by dp x micro-batch";
            if (!c.rejected.empty()) {
              out.push_back(c);
              continue;
            }
            c.microbatches = q.global_batch / (dp * b);
            if (schedule == ScheduleKind::Interleaved && c.microbatches < pp) {
              c.rejected = "interleaved needs at least pp microbatches";
              out.push_back(c);
              continue;
            }
            out.push_back(best_memory_options(q, c, platform));
          }
      }
  }
  std::stable_sort(out.begin(), out.end(), [](const Candidate& a, const Candidate& b) {
    if (a.rejected.empty() != b.rejected.empty()) return a.rejected.empty();
    return a.rejected.empty() && a.analytic_step_s < b.analytic_step_s;
  });
  return out;
}

Platform planner_platform(const std::string& name, int nodes, int gpus) {
  Platform platform = load_platform(name, nodes);
  if (nodes == 0 && platform.xml_file.empty())
    platform.nodes = std::max(platform.nodes, (gpus + platform.gpus_per_node - 1) / platform.gpus_per_node);
  return platform;
}

double simulate_in_child(const StepCosts& costs, const Platform& platform) {
  try {
    return std::stod(run_in_child("the simulation", [&] {
      char text[64];
      std::snprintf(text, sizeof text, "%.17g", simulate_step(costs, platform).step_time_s);
      return std::string(text);
    }));
  } catch (const core::UserError&) {
    return -1;
  }
}

}  // namespace quintnet::sim
