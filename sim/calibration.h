#pragma once
// Calibration: what one measured executor run says about the machine, in the terms
// the simulator uses, so it can predict other plans on the same machine.
//   - op costs at one core: an op of a stage with L layers (blocks, plus the embedding
//     and the head where the stage holds them) and F cost-model FLOPs takes
//     L x overhead + F / speed core-seconds, forward and backward, per tensor-parallel
//     degree.  From the run's op-shape probe (exec/train/op_probe.h): every rank's ops
//     on their own at two micro-batch sizes, at the run's tp and (with tp > 1)
//     unsharded, which gives both parts and the cost of sharding.  A trace without a
//     probe (micro-batch 1, older traces) gets all-FLOP costs from its training ops;
//   - the slowdown of the training ops against those costs: each compute event's
//     core-seconds are its duration less the tensor-parallel all-reduces inside it, at
//     the share of a core it had — the ranks' ops share the machine's cores, min(1,
//     cores / n) each while n ops run (counted from the trace), the model the simulator
//     runs —; what remains over the probe's costs is what sharing a CPU costs beyond
//     dividing it (measured here: 1.0–1.2 with a core per rank, 1.3–1.5 with more ranks
//     than cores: context switches, caches, the communication threads).  It applies to
//     plans of the same kind (more ranks than cores, or not) as the calibration run;
//   - message latency per hop, the distribution and its mean: every pipeline message's
//     receive end − the later of send and receive (Gloo moves a message once both sides
//     posted it, so the calibrated platform's messages are rendezvous too), and every
//     tensor-parallel ring all-reduce's end − its last member's start, / 2(n-1).
//     Messages here are latency-bound (tens of kB): the bandwidth is not fitted, 2 GB/s;
//   - the optimizer's core-seconds per parameter (its event less the two
//     gradient-norm all-reduces inside it, all ranks sharing the cores); the cores.
#include <map>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/cost_model.h"
#include "core/stage_balance.h"
#include "core/trace.h"
#include "sim/platform.h"

namespace quintnet::sim {

// What an op costs at one core, fitted from a trace: layers x overhead + FLOPs / speed.
// (Not core::OpCosts, the schedule model's per-action costs.)
struct OpTimeModel {
  double forward_flops_per_s = 0, backward_flops_per_s = 0;  // the FLOP-proportional part
  double forward_overhead_s = 0, backward_overhead_s = 0;    // per layer
};

struct Calibration {
  std::map<int, OpTimeModel> op_costs;  // by tensor-parallel degree: the run's, and 1 when probed
  int probe_ranks = 0;              // ranks whose op-shape probe gave them (0: none in the trace)
  double slowdown = 1;              // training ops' core-seconds / op_costs
  bool oversubscribed = false;      // whether the run had more ranks than cores
  double latency_s = 0, bandwidth = 0;  // per message hop (the mean)
  std::vector<double> latencies_s;      // the measured hops' latencies: 40 quantiles of them
  double optimizer_s_per_parameter = 0;
  // A forward that records no graph over one that does, from the probe (1 without one):
  // what full recomputation's first forward costs, its blocks running under no graph.
  double no_graph_forward_ratio = 1;
  int cores = 0, threads_per_rank = 1;
  int fitted_messages = 0, fitted_ops = 0;  // how much evidence
  std::string source;

  // The op costs at `tp`: measured ones, else those of the nearest measured degree.
  const OpTimeModel& costs_for_tp(int tp) const;
  // The slowdown for a plan of `ranks` ranks: the measured one when the plan is of the
  // run's kind (more ranks than cores, or not), else 1 (not known from this run).
  double slowdown_for(int ranks) const;
};

// The layers an op of this stage runs: its blocks, plus the embedding on the first
// stage and the head on the last.
int stage_layer_count(const core::ModelDims& model, const core::LayerRange& range);

// Throws core::UserError for a trace that is not an executor trace of a plan, or
// has no compute events.
Calibration calibrate(const core::Trace& trace, const std::string& source);
nlohmann::json calibration_to_json(const Calibration& c);
Calibration read_calibration(const std::string& path);

// The platform of the calibrated machine for a plan of `ranks` ranks: its cores
// shared by the ranks, the calibrated speed and latency, rendezvous messages.
Platform calibrated_platform(const Calibration& c, int ranks);

}  // namespace quintnet::sim
