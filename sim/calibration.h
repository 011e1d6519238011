#pragma once
// Calibration: what one measured executor run says about the machine, in the terms
// the simulator uses, so it can predict other plans on the same machine.
//   - compute speed: FLOP/s of one core for forward and for backward ops: each compute
//     event's cost-model FLOPs over its duration (less the tensor-parallel all-reduces
//     inside it) times the share of a core its rank had, min(1, cores / ranks): ranks
//     time-slice the cores, and a rank waiting in Gloo keeps polling its core;
//   - message latency per hop: the median of the p2p messages whose receiver was
//     waiting (t) and of the tensor-parallel ring all-reduces (t / 2(n-1)), divided by
//     max(1, ranks / cores) — on an oversubscribed CPU a message waits for its
//     receiver to be scheduled, which grows with the oversubscription.  Messages here
//     are latency-bound (tens of kB), so the bandwidth is not fitted: 2 GB/s assumed;
//   - the optimizer's time per parameter; the cores of the machine.
#include <string>

#include <nlohmann/json.hpp>

#include "core/trace.h"
#include "sim/platform.h"

namespace quintnet::sim {

struct Calibration {
  double forward_flops_per_s = 0, backward_flops_per_s = 0;  // of one core
  double latency_s = 0, bandwidth = 0;  // per message hop, at one rank per core
  double optimizer_s_per_parameter = 0;
  int cores = 0;
  int fitted_messages = 0, fitted_ops = 0;  // how much evidence
  std::string source;
};

// Throws core::UserError for a trace that is not an executor trace of a plan, or
// has no compute events.
Calibration calibrate(const core::Trace& trace, const std::string& source);
nlohmann::json calibration_to_json(const Calibration& c);
Calibration read_calibration(const std::string& path);

// The platform of the calibrated machine for a plan of `ranks` ranks: its cores
// shared by the ranks, the calibrated speed and the latency at that oversubscription.
Platform calibrated_platform(const Calibration& c, int ranks);

}  // namespace quintnet::sim
