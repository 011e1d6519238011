#include "sim/calibration.h"

#include <algorithm>
#include <cmath>
#include <fstream>
#include <functional>
#include <limits>
#include <map>
#include <numeric>
#include <tuple>

#include "core/cost_model.h"
#include "core/error.h"
#include "core/run_layout.h"
#include "core/trace_analysis.h"

namespace quintnet::sim {

using core::median;

int stage_layer_count(const core::ModelDims& model, const core::LayerRange& range) {
  return (range.end - range.first) + (range.first == 0 ? 1 : 0) + (range.end == model.layers ? 1 : 0);
}

namespace {

using Span = std::pair<double, double>;  // [start, end) in µs

// A compute event's spans less the tensor-parallel all-reduces nested in it.
std::vector<Span> compute_spans(const core::TraceEvent& e, const std::vector<const core::TraceEvent*>& tp_of_rank) {
  std::vector<Span> spans = {{e.ts_us, e.end_us()}};
  for (const core::TraceEvent* a : tp_of_rank) {
    if (a->ts_us < e.ts_us || a->end_us() > e.end_us()) continue;
    std::vector<Span> cut;
    for (const auto& [s0, s1] : spans) {
      if (a->ts_us >= s1 || a->end_us() <= s0) {
        cut.push_back({s0, s1});
        continue;
      }
      if (s0 < a->ts_us) cut.push_back({s0, a->ts_us});
      if (a->end_us() < s1) cut.push_back({a->end_us(), s1});
    }
    spans = std::move(cut);
  }
  return spans;
}

// How many ranks compute at each moment (a step function over all ranks' spans), and
// the core-seconds a span got: its duration at min(1, cores / ops running).
class CoreShare {
 public:
  CoreShare(const std::vector<std::vector<Span>>& all, double cores) : cores_(cores) {
    std::vector<std::pair<double, int>> edges;
    for (const auto& spans : all)
      for (const auto& [s0, s1] : spans) edges.push_back({s0, 1}), edges.push_back({s1, -1});
    std::sort(edges.begin(), edges.end());
    int running = 0;
    for (const auto& [t, d] : edges) {
      running += d;
      at_.push_back(t);
      running_.push_back(running);
    }
  }
  double core_seconds(const Span& span) const {
    auto i = std::upper_bound(at_.begin(), at_.end(), span.first) - at_.begin() - 1;
    double t = span.first, sum = 0;
    for (;;) {
      const int n = i >= 0 ? std::max(1, running_[i]) : 1;
      const double next = i + 1 < static_cast<long>(at_.size()) ? std::min(span.second, at_[i + 1]) : span.second;
      sum += (next - t) * std::min(1.0, cores_ / n);
      t = next;
      if (t >= span.second) break;
      ++i;
    }
    return sum * 1e-6;
  }

 private:
  double cores_;
  std::vector<double> at_;
  std::vector<int> running_;
};

// Op costs from the op-shape probe (exec/train/op_probe.h): each rank's ops at a few
// micro-batch sizes, on their own.  Summed over ranks, the time at each size is
// layers x overhead + FLOPs / speed: a straight line in the FLOPs, fitted by least
// squares.  `part` is null for the run's tp, "tp1" for the unsharded copies.  False
// when the trace has no usable probe of that part.
bool fit_probe(const nlohmann::json& probe, const char* part, bool backward, const std::vector<double>& layers_of_rank,
               const std::function<double(int rank, double micro_batch)>& flops_of_rank, OpTimeModel& costs) {
  const char* field = backward ? "backward_s" : "forward_s";
  std::vector<double> t, flops;  // per size, summed over ranks
  double layers = 0;
  for (const auto& r : probe) {
    const int rank = r.value("rank", -1);
    if (part && !r.contains(part)) return false;
    const nlohmann::json times = (part ? r[part] : r).value(field, nlohmann::json::array());
    const nlohmann::json sizes = r.value("micro_batch", nlohmann::json::array());
    if (rank < 0 || rank >= static_cast<int>(layers_of_rank.size()) || sizes.size() < 2 || times.size() != sizes.size())
      return false;
    if (t.empty()) t.assign(sizes.size(), 0.0), flops.assign(sizes.size(), 0.0);
    if (t.size() != sizes.size()) return false;  // every rank probes the same sizes
    for (size_t k = 0; k < sizes.size(); ++k) {
      t[k] += times[k].get<double>();
      flops[k] += flops_of_rank(rank, sizes[k].get<double>());
    }
    layers += layers_of_rank[rank];
  }
  const double n = static_cast<double>(t.size());
  if (n < 2 || layers <= 0) return false;
  const double mean_t = std::accumulate(t.begin(), t.end(), 0.0) / n;
  const double mean_f = std::accumulate(flops.begin(), flops.end(), 0.0) / n;
  double covariance = 0, variance = 0;
  for (size_t k = 0; k < t.size(); ++k) {
    covariance += (flops[k] - mean_f) * (t[k] - mean_t);
    variance += (flops[k] - mean_f) * (flops[k] - mean_f);
  }
  if (!(variance > 0 && mean_t > 0)) return false;
  double seconds_per_flop = covariance / variance;
  double overhead_s = (mean_t - seconds_per_flop * mean_f) / layers;
  if (overhead_s < 0 || seconds_per_flop <= 0) {  // noise: no measurable fixed part
    overhead_s = 0;
    seconds_per_flop = mean_t / mean_f;
  }
  (backward ? costs.backward_overhead_s : costs.forward_overhead_s) = overhead_s;
  (backward ? costs.backward_flops_per_s : costs.forward_flops_per_s) = 1 / seconds_per_flop;
  return true;
}

// Op costs (sim::OpTimeModel per tp degree), from the training ops' core-seconds and,
// when the trace has one, the op-shape probe; also the slowdown between the two.
void fit_op_costs(const core::Trace& trace, const core::RunLayout& layout, const std::string& source, Calibration& c) {
  const int threads = c.threads_per_rank;
  const core::ModelDims& dims = layout.model;
  const int pp = layout.pp, tp = layout.tp, chunks = layout.chunks;
  const std::vector<core::LayerRange>& ranges = layout.stages;

  // Compute: each op's core-seconds, FLOPs and layers, summed per direction.
  std::vector<const core::TraceEvent*> computes;
  std::map<int, std::vector<const core::TraceEvent*>> tp_by_rank;
  for (const auto& e : trace.events) {
    if (e.lane == core::Lane::Compute && (e.kind == "forward" || e.kind.rfind("backward", 0) == 0)) computes.push_back(&e);
    if (e.lane == core::Lane::TpCollective) tp_by_rank[e.rank].push_back(&e);
  }
  if (computes.empty()) throw core::UserError(source + ": no forward or backward events to calibrate from");
  std::vector<std::vector<Span>> spans;
  for (const core::TraceEvent* e : computes) spans.push_back(compute_spans(*e, tp_by_rank[e->rank]));
  const CoreShare share(spans, static_cast<double>(c.cores) / threads);
  struct Sums {
    double core_seconds = 0, flops = 0, layers = 0;
  } forward, backward;
  for (size_t i = 0; i < computes.size(); ++i) {
    const core::TraceEvent& e = *computes[i];
    const int rank_pp = e.rank < static_cast<int>(trace.ranks.size()) ? trace.ranks[e.rank].pp : 0;
    const int stage = std::max(0, e.chunk) * pp + rank_pp;
    const core::StageCost cost =
        core::stage_cost(dims, ranges[stage].first, ranges[stage].end, layout.micro_batch_size, tp, 4.0);
    const bool is_forward = e.kind == "forward";
    const double part = is_forward || e.kind == "backward" ? 1.0 : 0.5;  // BI and BW: half a backward each
    Sums& sums = is_forward ? forward : backward;
    for (const Span& s : spans[i]) sums.core_seconds += share.core_seconds(s) * threads;
    sums.flops += part * (is_forward ? cost.forward_flops : cost.backward_flops);
    sums.layers += part * stage_layer_count(dims, ranges[stage]);
  }
  if (!(forward.core_seconds > 0 && backward.core_seconds > 0))
    throw core::UserError(source + ": the forward and backward events have no duration to calibrate from");
  // Op costs: from the probe when the trace has one (at the run's tp and unsharded),
  // else all FLOPs at the speed the training ops had.
  OpTimeModel trained;
  trained.forward_flops_per_s = forward.flops / forward.core_seconds;
  trained.backward_flops_per_s = backward.flops / backward.core_seconds;
  c.op_costs[tp] = trained;
  const nlohmann::json probe = trace.platform.value("op_probe", nlohmann::json());
  if (probe.is_array() && static_cast<int>(probe.size()) == static_cast<int>(trace.ranks.size())) {
    std::vector<double> layers_of_rank(trace.ranks.size(), 0);
    for (size_t r = 0; r < trace.ranks.size(); ++r)
      for (int k = 0; k < chunks; ++k) layers_of_rank[r] += stage_layer_count(dims, ranges[k * pp + trace.ranks[r].pp]);
    // FLOPs are linear in the micro-batch: those of one sample, scaled.
    auto flops_of_rank = [&](int rank, double micro_batch, int at_tp, bool backward_op) {
      double sum = 0;
      for (int k = 0; k < chunks; ++k) {
        const core::LayerRange& range = ranges[k * pp + trace.ranks[rank].pp];
        const core::StageCost one = core::stage_cost(dims, range.first, range.end, 1, at_tp, 4.0);
        sum += micro_batch * (backward_op ? one.backward_flops : one.forward_flops);
      }
      return sum;
    };
    auto fit = [&](const char* part, int at_tp, OpTimeModel& costs) {
      return fit_probe(probe, part, false, layers_of_rank, [&](int r, double b) { return flops_of_rank(r, b, at_tp, false); }, costs) &&
             fit_probe(probe, part, true, layers_of_rank, [&](int r, double b) { return flops_of_rank(r, b, at_tp, true); }, costs);
    };
    OpTimeModel probed, unsharded;
    if (fit(nullptr, tp, probed)) {
      c.op_costs[tp] = probed;
      c.probe_ranks = static_cast<int>(probe.size());
      if (tp > 1 && fit("tp1", 1, unsharded)) c.op_costs[1] = unsharded;
      // What the training ops took over what the probe says they cost alone.
      const double alone = forward.layers * probed.forward_overhead_s + forward.flops / probed.forward_flops_per_s +
                           backward.layers * probed.backward_overhead_s + backward.flops / probed.backward_flops_per_s;
      c.slowdown = (forward.core_seconds + backward.core_seconds) / alone;
      // The median over the ranks of their no-graph forward over their forward, at the
      // run's micro-batch.
      std::vector<double> ratios;
      for (const auto& rank : probe)
        if (rank.contains("forward_no_graph_s") && rank.at("forward_s").at(0).get<double>() > 0)
          ratios.push_back(rank.at("forward_no_graph_s").get<double>() / rank.at("forward_s").at(0).get<double>());
      if (!ratios.empty()) c.no_graph_forward_ratio = core::median(ratios);
    }
  }
  c.fitted_ops = static_cast<int>(computes.size());
}

// The latency of each measured hop (seconds, its bytes' transfer time taken off): every
// pipeline message's and every TP all-reduce's hops.
std::vector<double> message_hops(const core::Trace& trace, int tp, double bandwidth) {
  // Gloo moves a pipeline message once both sides posted it: receive end - the later
  // of send and receive.
  std::vector<double> hops;
  std::map<std::pair<int, long long>, const core::TraceEvent*> recv_by_end;
  for (const auto& e : trace.events)
    if (e.lane == core::Lane::P2P && e.kind == "recv") recv_by_end[{e.rank, std::llround(e.end_us())}] = &e;
  for (const auto& f : trace.flows) {
    auto it = recv_by_end.find({f.to_rank, std::llround(f.to_ts_us)});
    if (it == recv_by_end.end()) continue;
    const double both_posted = std::max(f.from_ts_us, it->second->ts_us);
    hops.push_back((f.to_ts_us - both_posted) * 1e-6 - it->second->bytes / bandwidth);
  }
  // A TP all-reduce, like a message, can only move once every member has posted it:
  // the k-th all-reduce of a step on the members of one tp group is one collective,
  // and its hops take (end - the last member's start) / 2(tp - 1) each.
  if (tp > 1) {
    std::map<std::tuple<int, int, int>, std::map<int, std::vector<const core::TraceEvent*>>> groups;  // (step, dp, pp) -> rank -> all-reduces
    for (const auto& e : trace.events)
      if (e.lane == core::Lane::TpCollective && e.bytes > 0 && e.rank < static_cast<int>(trace.ranks.size()))
        groups[{e.step, trace.ranks[e.rank].dp, trace.ranks[e.rank].pp}][e.rank].push_back(&e);
    for (auto& [key, members] : groups) {
      size_t count = std::numeric_limits<size_t>::max();
      for (auto& [rank, list] : members) {
        std::sort(list.begin(), list.end(), [](auto* a, auto* b) { return a->ts_us < b->ts_us; });
        count = std::min(count, list.size());
      }
      if (static_cast<int>(members.size()) != tp) continue;  // a member's events are missing
      for (size_t k = 0; k < count; ++k) {
        double last_start = 0;
        for (const auto& [rank, list] : members) last_start = std::max(last_start, list[k]->ts_us);
        for (const auto& [rank, list] : members)
          hops.push_back((list[k]->end_us() - last_start) * 1e-6 / (2.0 * (tp - 1)) -
                         static_cast<double>(list[k]->bytes) / (tp * bandwidth));
      }
    }
  }
  return hops;
}

// The optimizer's time per parameter: its event holds the gradient-norm all-reduces
// over tp and pp (the simulator models those as messages) and runs on every rank at once.
double optimizer_s_per_parameter(const core::Trace& trace, const core::RunLayout& layout, const Calibration& c) {
  const int threads = c.threads_per_rank, tp = layout.tp, pp = layout.pp;
  const core::ModelDims& dims = layout.model;
  std::vector<double> optimizer;
  for (const auto& e : trace.events)
    if (e.lane == core::Lane::Compute && e.kind == "optimizer") optimizer.push_back(e.dur_us * 1e-6);
  const int ranks = static_cast<int>(std::max<size_t>(1, trace.ranks.size()));
  const double all_at_once = std::min(1.0, static_cast<double>(c.cores) / (ranks * threads)) * threads;
  const double norm_messages = (2.0 * (tp - 1) + 2.0 * (pp - 1)) * c.latency_s;
  const double params_per_rank = dims.parameters() / (tp * pp);
  return optimizer.empty() ? 0 : std::max(0.0, median(optimizer) - norm_messages) * all_at_once / params_per_rank;
}

}  // namespace

Calibration calibrate(const core::Trace& trace, const std::string& source) {
  if (trace.source != "exec")
    throw core::UserError(source + ": calibration needs an executor trace (quintnet train --trace), this one is '" +
                          trace.source + "'");
  if (trace.plan.is_null() || !trace.plan.is_object())
    throw core::UserError(source + ": the trace carries no plan (otherData.plan)");
  const core::RunLayout layout = core::resolve_layout(core::parse_plan_json(trace.plan, source).plan);
  Calibration c;
  c.source = source;
  c.cores = trace.platform.value("cores", 0);
  if (c.cores <= 0) throw core::UserError(source + ": the trace does not say how many cores the machine has (otherData.platform.cores)");
  const int threads = trace.platform.value("threads_per_rank", 1);
  c.threads_per_rank = threads;
  c.oversubscribed = static_cast<int>(trace.ranks.size()) * threads > c.cores;

  fit_op_costs(trace, layout, source, c);

  // Message latency per hop.  Gloo moves a pipeline message once both sides posted it,
  // so every message measures it: receive end - the later of send and receive.  On a
  // busy CPU they spread over milliseconds (whether the peers' threads get a core): the
  // simulation draws from the distribution, the mean is kept for analytic uses.
  c.bandwidth = 2e9;
  std::vector<double> hops = message_hops(trace, layout.tp, c.bandwidth);
  c.fitted_messages = static_cast<int>(hops.size());
  c.latency_s = hops.empty() ? 0.0 : std::max(0.0, std::accumulate(hops.begin(), hops.end(), 0.0) / hops.size());
  // Their spread, for the simulator to draw from: the midpoints of 40 equal shares.
  if (!hops.empty()) {
    std::sort(hops.begin(), hops.end());
    constexpr int kQuantiles = 40;
    for (int q = 0; q < kQuantiles; ++q)
      c.latencies_s.push_back(std::max(0.0, hops[static_cast<size_t>((q + 0.5) / kQuantiles * hops.size())]));
  }
  c.optimizer_s_per_parameter = optimizer_s_per_parameter(trace, layout, c);
  return c;
}

const OpTimeModel& Calibration::costs_for_tp(int tp) const {
  auto nearest = op_costs.begin();
  for (auto it = op_costs.begin(); it != op_costs.end(); ++it)
    if (std::abs(it->first - tp) < std::abs(nearest->first - tp)) nearest = it;
  return nearest->second;
}

double Calibration::slowdown_for(int ranks) const {
  return (ranks * threads_per_rank > cores) == oversubscribed ? slowdown : 1.0;
}

nlohmann::json calibration_to_json(const Calibration& c) {
  nlohmann::json costs = nlohmann::json::array();
  for (const auto& [tp, k] : c.op_costs)
    costs.push_back({{"tp", tp},
                     {"forward_flops_per_s", k.forward_flops_per_s},
                     {"forward_overhead_s", k.forward_overhead_s},
                     {"backward_flops_per_s", k.backward_flops_per_s},
                     {"backward_overhead_s", k.backward_overhead_s}});
  return {{"format", "quintnet-calibration"},
          {"source", c.source},
          {"op_costs", costs},
          {"probe_ranks", c.probe_ranks},
          {"slowdown", c.slowdown},
          {"oversubscribed", c.oversubscribed},
          {"latency_s", c.latency_s},
          {"latencies_s", c.latencies_s},
          {"bandwidth", c.bandwidth},
          {"optimizer_s_per_parameter", c.optimizer_s_per_parameter},
          {"no_graph_forward_ratio", c.no_graph_forward_ratio},
          {"cores", c.cores},
          {"threads_per_rank", c.threads_per_rank},
          {"fitted_messages", c.fitted_messages},
          {"fitted_ops", c.fitted_ops}};
}

Calibration read_calibration(const std::string& path) {
  std::ifstream in(path);
  if (!in) throw core::UserError(path + ": cannot open the calibration");
  try {
    const nlohmann::json j = nlohmann::json::parse(in);
    if (j.value("format", "") != "quintnet-calibration") throw core::UserError("");
    if (!j.contains("op_costs"))
      throw core::UserError(path + ": a calibration from an older quintnet (no op_costs): calibrate again from the trace");
    Calibration c;
    c.source = j.at("source").get<std::string>();
    for (const auto& k : j.at("op_costs")) {
      OpTimeModel& costs = c.op_costs[k.at("tp").get<int>()];
      costs.forward_flops_per_s = k.at("forward_flops_per_s").get<double>();
      costs.forward_overhead_s = k.at("forward_overhead_s").get<double>();
      costs.backward_flops_per_s = k.at("backward_flops_per_s").get<double>();
      costs.backward_overhead_s = k.at("backward_overhead_s").get<double>();
      if (!(costs.forward_flops_per_s > 0 && costs.backward_flops_per_s > 0 && costs.forward_overhead_s >= 0 &&
            costs.backward_overhead_s >= 0))
        throw core::UserError("");
    }
    c.probe_ranks = j.at("probe_ranks").get<int>();
    c.slowdown = j.at("slowdown").get<double>();
    c.oversubscribed = j.at("oversubscribed").get<bool>();
    c.latency_s = j.at("latency_s").get<double>();
    c.latencies_s = j.at("latencies_s").get<std::vector<double>>();
    c.bandwidth = j.at("bandwidth").get<double>();
    c.optimizer_s_per_parameter = j.at("optimizer_s_per_parameter").get<double>();
    c.no_graph_forward_ratio = j.value("no_graph_forward_ratio", 1.0);  // older calibrations: none
    if (!(c.no_graph_forward_ratio > 0)) throw core::UserError("");
    c.cores = j.at("cores").get<int>();
    c.threads_per_rank = j.at("threads_per_rank").get<int>();
    for (double l : c.latencies_s)
      if (!(l >= 0)) throw core::UserError("");
    if (c.op_costs.empty() || !(c.slowdown > 0 && c.bandwidth > 0 && c.cores > 0 && c.threads_per_rank > 0))
      throw core::UserError("");
    return c;
  } catch (const core::UserError& e) {
    if (std::string(e.what()).empty()) throw core::UserError(path + ": not a QuintNet calibration (write one with quintnet calibrate)");
    throw;
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
  p.peak_flops = c.costs_for_tp(1).forward_flops_per_s;  // the unit op times are executed in
  p.efficiency = 1.0;
  p.memory_bytes = 0;  // unknown: no memory check, none printed
  p.intra_bandwidth = c.bandwidth;
  p.intra_latency = c.latency_s;
  p.p2p_rendezvous = true;  // Gloo
  p.measured_latencies = c.latencies_s;
  (void)ranks;
  return p;
}

}  // namespace quintnet::sim
