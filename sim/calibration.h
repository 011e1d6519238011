#pragma once
// Calibration: what one measured executor run says about the machine, in the terms
// the simulator uses, so it can predict other plans on the same machine.
//   - compute speed: FLOP/s of one core for forward and for backward ops: each compute
//     event's cost-model FLOPs over its duration (less the tensor-parallel all-reduces
//     inside it) times the share of a core its rank had, min(1, cores / ranks): ranks
//     time-slice the cores, and a rank waiting in Gloo keeps polling its core;
//   - message latency per hop: the mean over the pipeline messages of receive end −
//     the later of send and receive (Gloo moves a message once both sides posted it,
//     so the calibrated platform's messages are rendezvous too) and over the
//     tensor-parallel ring all-reduces (t / 2(n-1)).  Messages here are latency-bound
//     (tens of kB), so the bandwidth is not fitted: 2 GB/s assumed;
//   - the optimizer's time per parameter; the cores of the machine.
#include <string>

#include <nlohmann/json.hpp>

#include "core/trace.h"
#include "sim/platform.h"

namespace quintnet::sim {

struct Calibration {
  double forward_flops_per_s = 0, backward_flops_per_s = 0;  // of one core
  double latency_s = 0, bandwidth = 0;  // per message hop
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
// shared by the ranks, the calibrated speed and latency, rendezvous messages.
Platform calibrated_platform(const Calibration& c, int ranks);

}  // namespace quintnet::sim
