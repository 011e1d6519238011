#include "sim/calibration.h"

#include <algorithm>
#include <cmath>
#include <fstream>
#include <numeric>

#include "core/cost_model.h"
#include "core/error.h"
#include "core/stage_balance.h"
#include "core/trace_analysis.h"

namespace quintnet::sim {

using core::median;

Calibration calibrate(const core::Trace& trace, const std::string& source) {
  if (trace.source != "exec")
    throw core::UserError(source + ": calibration needs an executor trace (quintnet train --trace), this one is '" +
                          trace.source + "'");
  if (trace.plan.is_null() || !trace.plan.is_object())
    throw core::UserError(source + ": the trace carries no plan (otherData.plan)");
  const core::Plan plan = core::parse_plan_json(trace.plan, source).plan;
  Calibration c;
  c.source = source;
  c.cores = trace.platform.value("cores", 0);
  if (c.cores <= 0) throw core::UserError(source + ": the trace does not say how many cores the machine has (otherData.platform.cores)");
  const int threads = trace.platform.value("threads_per_rank", 1);
  const core::ModelDims dims = core::model_dims(plan.model, plan.max_seq_length);
  const int pp = plan.pp(), chunks = plan.virtual_stages, stages = pp * chunks;
  const std::vector<core::LayerRange> ranges = core::balanced_stages(dims, stages);

  // Compute: FLOPs / core-seconds per event.
  std::vector<const core::TraceEvent*> computes;
  for (const auto& e : trace.events)
    if (e.lane == core::Lane::Compute && (e.kind == "forward" || e.kind == "backward")) computes.push_back(&e);
  if (computes.empty()) throw core::UserError(source + ": no forward or backward events to calibrate from");
  const int ranks = static_cast<int>(std::max<size_t>(1, trace.ranks.size()));
  const double oversubscription = std::max(1.0, static_cast<double>(ranks) * threads / c.cores);
  std::vector<double> forward_speed, backward_speed;
  for (const core::TraceEvent* e : computes) {
    double tp_inside = 0;  // the TP all-reduces run inside the op in the executor
    for (const auto& o : trace.events)
      if (o.rank == e->rank && o.lane == core::Lane::TpCollective && o.ts_us >= e->ts_us && o.end_us() <= e->end_us())
        tp_inside += o.dur_us;
    const int rank_pp = e->rank < static_cast<int>(trace.ranks.size()) ? trace.ranks[e->rank].pp : 0;
    const int stage = std::max(0, e->chunk) * pp + rank_pp;
    const core::StageCost cost =
        core::stage_cost(dims, ranges[stage].first, ranges[stage].end, plan.micro_batch_size(), plan.tp(), 4.0);
    const double core_seconds = (e->dur_us - tp_inside) * 1e-6 * threads / oversubscription;
    if (core_seconds <= 0) continue;
    (e->kind == "forward" ? forward_speed : backward_speed)
        .push_back((e->kind == "forward" ? cost.forward_flops : cost.backward_flops) / core_seconds);
  }
  c.forward_flops_per_s = median(forward_speed);
  c.backward_flops_per_s = median(backward_speed);
  c.fitted_ops = static_cast<int>(forward_speed.size() + backward_speed.size());

  // Message latency per hop.  Gloo moves a pipeline message once both sides posted it,
  // so every message measures it: receive end - the later of send and receive.  And the
  // TP ring all-reduces: 2(tp - 1) hops each.  The mean, not the median: on an
  // oversubscribed CPU the latencies spread from 0.1 to 30 ms (whether the peers'
  // threads get a core), and every one of them adds to the step.
  c.bandwidth = 2e9;
  std::vector<double> hops;
  std::map<std::pair<int, long long>, const core::TraceEvent*> recv_by_end;
  for (const auto& e : trace.events)
    if (e.lane == core::Lane::P2P && e.kind == "recv") recv_by_end[{e.rank, std::llround(e.end_us())}] = &e;
  for (const auto& f : trace.flows) {
    auto it = recv_by_end.find({f.to_rank, std::llround(f.to_ts_us)});
    if (it == recv_by_end.end()) continue;
    const double both_posted = std::max(f.from_ts_us, it->second->ts_us);
    hops.push_back((f.to_ts_us - both_posted) * 1e-6 - it->second->bytes / c.bandwidth);
  }
  const int tp = plan.tp();
  if (tp > 1)
    for (const auto& e : trace.events)
      if (e.lane == core::Lane::TpCollective && e.bytes > 0)
        hops.push_back(e.dur_us * 1e-6 / (2.0 * (tp - 1)) - static_cast<double>(e.bytes) / (tp * c.bandwidth));
  c.fitted_messages = static_cast<int>(hops.size());
  c.latency_s = hops.empty() ? 0.0 : std::max(0.0, std::accumulate(hops.begin(), hops.end(), 0.0) / hops.size());

  std::vector<double> optimizer;
  for (const auto& e : trace.events)
    if (e.lane == core::Lane::Compute && e.kind == "optimizer") optimizer.push_back(e.dur_us * 1e-6);
  const double params_per_rank = dims.parameters() / (plan.tp() * pp);
  c.optimizer_s_per_parameter = params_per_rank > 0 ? median(optimizer) * threads / oversubscription / params_per_rank : 0;
  return c;
}

nlohmann::json calibration_to_json(const Calibration& c) {
  return {{"format", "quintnet-calibration"},      {"source", c.source},
          {"forward_flops_per_s", c.forward_flops_per_s}, {"backward_flops_per_s", c.backward_flops_per_s},
          {"latency_s", c.latency_s},              {"bandwidth", c.bandwidth},
          {"optimizer_s_per_parameter", c.optimizer_s_per_parameter}, {"cores", c.cores},
          {"fitted_messages", c.fitted_messages},  {"fitted_ops", c.fitted_ops}};
}

Calibration read_calibration(const std::string& path) {
  std::ifstream in(path);
  if (!in) throw core::UserError(path + ": cannot open the calibration");
  try {
    const nlohmann::json j = nlohmann::json::parse(in);
    if (j.value("format", "") != "quintnet-calibration") throw core::UserError("");
    Calibration c;
    c.source = j.at("source").get<std::string>();
    c.forward_flops_per_s = j.at("forward_flops_per_s").get<double>();
    c.backward_flops_per_s = j.at("backward_flops_per_s").get<double>();
    c.latency_s = j.at("latency_s").get<double>();
    c.bandwidth = j.at("bandwidth").get<double>();
    c.optimizer_s_per_parameter = j.at("optimizer_s_per_parameter").get<double>();
    c.cores = j.at("cores").get<int>();
    if (!(c.forward_flops_per_s > 0 && c.backward_flops_per_s > 0 && c.bandwidth > 0 && c.cores > 0))
      throw core::UserError("");
    return c;
  } catch (const std::exception&) {
    throw core::UserError(path + ": not a QuintNet calibration (write one with quintnet calibrate)");
  }
}

Platform calibrated_platform(const Calibration& c, int ranks) {
  Platform p;
  p.name = "calibrated (" + c.source + ")";
  p.nodes = 1;
  p.gpus_per_node = 1 << 16;
  p.cores_per_node = c.cores;
  p.peak_flops = c.forward_flops_per_s;
  p.efficiency = 1.0;
  p.memory_bytes = 0;  // unknown: no memory check, none printed
  p.intra_bandwidth = c.bandwidth;
  p.intra_latency = c.latency_s;
  p.p2p_rendezvous = true;  // Gloo
  (void)ranks;
  return p;
}

}  // namespace quintnet::sim
