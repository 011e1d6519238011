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
  p.mesh_name = {"dp", "tp", "pp"};
  p.schedule = c.schedule;
  p.virtual_stages = c.chunks;
  p.device_type = "cuda";
  return p;
}

// A ring all-reduce of `bytes` over n ranks whose hops have latency a and bandwidth B.
double ring_time(double bytes, int n, double a, double b) { return n <= 1 ? 0.0 : 2.0 * (n - 1) * (a + bytes / (n * b)); }

std::string gib(double bytes) {
  char s[32];
  std::snprintf(s, sizeof(s), "%.1f GiB", bytes / (1024.0 * 1024 * 1024));
  return s;
}

}  // namespace

std::string Candidate::layout() const {
  char s[128];
  std::snprintf(s, sizeof(s), "dp %d x tp %d x pp %d, micro %d x %d, %s%s", dp, tp, pp, micro_batch, microbatches,
                schedule.c_str(), chunks > 1 ? (" v" + std::to_string(chunks)).c_str() : "");
  return s;
}

SimPlan candidate_sim_plan(const PlanQuery& q, const Candidate& c, const Platform& platform) {
  return make_sim_plan(plan_of(q, c), platform, q.model, q.seq);
}

std::vector<Candidate> enumerate_layouts(const PlanQuery& q, const Platform& platform) {
  const core::ModelDims dims = core::model_dims(q.model);
  if (q.gpus > platform.gpus())
    throw core::UserError("--gpus " + std::to_string(q.gpus) + ": the platform has " + std::to_string(platform.gpus()) +
                          (platform.xml_file.empty() ? " (use --nodes)" : " (the hosts of " + platform.xml_file + ")"));
  std::vector<Candidate> out;
  for (int tp = 1; tp <= q.gpus; tp *= 2)
    for (int pp = 1; tp * pp <= q.gpus; ++pp) {
      if (q.gpus % (tp * pp) != 0) continue;
      const int dp = q.gpus / (tp * pp);
      for (int b : q.micro_batches)
        for (const std::string& schedule : q.schedules) {
          Candidate c;
          c.dp = dp, c.tp = tp, c.pp = pp, c.micro_batch = b, c.schedule = schedule;
          c.chunks = schedule == "interleaved" ? 2 : 1;
          if ((schedule == "interleaved" || schedule == "zb-h1" || schedule == "afab") && pp == 1) continue;
          if (tp > platform.gpus_per_node) c.rejected = "tp larger than a node's GPUs (tensor parallelism needs NVLink)";
          else if (dims.heads % tp != 0) c.rejected = "tp does not divide the attention heads";
          else if (dims.layers < pp * c.chunks) c.rejected = "fewer layers than pipeline stages";
          else if (q.global_batch % (dp * b) != 0) c.rejected = "global batch not divisible by dp x micro-batch";
          if (!c.rejected.empty()) {
            out.push_back(c);
            continue;
          }
          c.microbatches = q.global_batch / (dp * b);
          if (schedule == "interleaved" && c.microbatches < pp) {
            c.rejected = "interleaved needs at least pp microbatches";
            out.push_back(c);
            continue;
          }
          const SimPlan s = candidate_sim_plan(q, c, platform);
          c.memory_bytes = *std::max_element(s.memory_bytes.begin(), s.memory_bytes.end());
          if (platform.memory_bytes > 0 && c.memory_bytes > platform.memory_bytes) {
            c.rejected = "does not fit: " + gib(c.memory_bytes) + " per GPU";
            out.push_back(c);
            continue;
          }
          // Analytic step: the slowest stage's op times plus its TP all-reduces, in core's
          // schedule simulation; then the exposed DP gradient all-reduce.
          const bool tp_in_node = tp <= platform.gpus_per_node;
          const double hop_a = tp_in_node ? platform.intra_latency : platform.intra_latency + platform.inter_latency;
          const double tp_comm = s.tp_allreduces_per_op * ring_time(s.tp_allreduce_bytes, tp, hop_a, platform.intra_bandwidth);
          core::OpCosts costs;
          costs.forward = *std::max_element(s.forward_s.begin(), s.forward_s.end()) + c.chunks * tp_comm;
          costs.backward_input = *std::max_element(s.backward_input_s.begin(), s.backward_input_s.end()) + c.chunks * tp_comm;
          costs.backward_weight = *std::max_element(s.backward_weight_s.begin(), s.backward_weight_s.end());
          const bool pp_crosses_nodes = tp * dp >= platform.gpus_per_node;
          costs.p2p = pp_crosses_nodes ? platform.intra_latency + platform.inter_latency + s.p2p_bytes / platform.nic_bandwidth
                                       : platform.intra_latency + s.p2p_bytes / platform.intra_bandwidth;
          const double dp_bandwidth = tp * dp > platform.gpus_per_node ? platform.nic_bandwidth : platform.intra_bandwidth;
          const double dp_latency = tp * dp > platform.gpus_per_node ? platform.inter_latency + platform.intra_latency
                                                                    : platform.intra_latency;
          const double grads = *std::max_element(s.dp_grad_bytes.begin(), s.dp_grad_bytes.end());
          c.analytic_step_s = core::simulate_schedule(s.schedule, costs).step_time +
                              ring_time(grads, dp, dp_latency, dp_bandwidth) + s.optimizer_s;
          out.push_back(c);
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

double simulate_in_child(const SimPlan& plan, const Platform& platform) {
  try {
    return std::stod(run_in_child("the simulation", [&] {
      char text[64];
      std::snprintf(text, sizeof text, "%.17g", simulate_step(plan, platform).step_time_s);
      return std::string(text);
    }));
  } catch (const core::UserError&) {
    return -1;
  }
}

}  // namespace quintnet::sim
