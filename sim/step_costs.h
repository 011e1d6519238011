#pragma once
// sim::StepCosts — what the simulator runs: the schedule every pipeline rank interprets
// (the same core::Schedule the executor runs), what each op costs in seconds, and what
// each message and collective carries.  Built from a core::RunLayout and the cost model
// (make_step_costs) or from uniform op times (closed-form checks, teaching).  (Called
// SimPlan until the run-layout redesign: "plan" now means core::Plan everywhere.)
#include <string>
#include <vector>

#include "core/cost_model.h"
#include "core/layer_kernels.h"
#include "core/plan.h"
#include "core/run_layout.h"
#include "core/schedule.h"
#include "sim/calibration.h"
#include "sim/platform.h"

namespace quintnet::sim {

// One pipeline rank's ring attention per microbatch, over all its layers and chunks (an
// op of a chunk: 1/chunks of it).  The attention times are part of the op times
// (forward_s, backward_input_s): the ring runs them step by step, 1/cp at a time, beside
// its hops (sim/cp_ring.h).
struct CpRingCosts {
  double attention_forward_s = 0;    // the attention core's forward, all ring steps
  double attention_backward_s = 0;   // its backward (in BI)
  double attention_recompute_s = 0;  // its forward again inside BI (full or selective recomputation)
  double block_bytes = 0;            // keys and values of all the rank's layers: one ring hop's message
  int layers = 0;                    // the rank's layers: one ring per layer in the closed form
  // The closed form (each layer's hops on their own route, no other traffic): seconds the
  // hops take beyond the attention they overlap, per microbatch — the planner's estimate
  // and the summary's comparison.
  double estimate_forward_s = 0, estimate_backward_s = 0;
};

struct StepCosts {
  core::Schedule schedule;
  // dp: the ranks that average gradients — dp × cp under context parallelism (cp ranks
  // hold the same weights); the simulated mesh's dp axis stands for both.
  int tp = 1, dp = 1;
  // Context parallelism: each rank computes s/cp tokens of every sample (its op times
  // below) and its ring attention passes key/value blocks around the cp group in every
  // layer (sim/cp_ring.h; its costs per pipeline rank below, empty when cp is 1).
  int cp = 1;
  std::vector<CpRingCosts> cp_ring;
  // Seconds of one pipeline rank's whole share of the model per microbatch (a chunk
  // costs 1/chunks of it), per pipeline rank; B costs backward_input + backward_weight.
  std::vector<double> forward_s, backward_input_s, backward_weight_s;
  double optimizer_s = 0;
  // How the run is implemented (core::Plan's keys of the same names).
  bool dp_overlap = true;          // DP buckets all-reduced during the backward, else at GRAD_SYNC
  bool tp_overlap = false;         // an op's TP all-reduces run while it computes
  bool pp_scatter_gather = false;  // with tp > 1: 1/tp of each message per tp rank, then an all-gather over tp
  // The executor's collectives between the last backward and the optimizer (statistics
  // broadcast over pp, gradient-norm all-reduces over tp and pp); plans from a
  // core::Plan have them, uniform (closed-form) plans do not.
  bool step_end_collectives = false;
  // A tied head on the last of pp > 1 stages holds a copy of the embedding; after the
  // backward the pipeline's first and last ranks all-reduce its gradient (fp32, this many
  // bytes: exec/pp/tied_gradients.h).  0: nothing tied across stages.
  double tied_gradient_bytes = 0;
  double p2p_bytes = 0;              // one activation (or gradient) message
  double tp_allreduce_bytes = 0;     // one TP all-reduce; tp_allreduces_per_op of them per F and per B
  int tp_allreduces_per_op = 0;
  // Full recomputation: the forward's TP all-reduces again in each B (or BI).  With
  // sequence parallelism each all-reduce is an all-gather and a reduce-scatter: on a ring
  // the same time (2(n-1) steps of S/n), so they are simulated as all-reduces.
  int tp_allreduces_recompute = 0;
  // zero_stage 1: each DP bucket is reduce-scattered instead of all-reduced, the optimizer
  // updates 1/dp of the parameters, and the updated parameters are all-gathered over dp
  // after it (not overlapped with the next step's forward).
  int zero_stage = 0;
  std::vector<double> dp_grad_bytes;  // per pipeline rank: gradients all-reduced over dp per step
  std::vector<double> dp_gather_bytes;  // per pipeline rank: ZeRO-1's parameters all-gathered (bf16 under bf16 weights)
  double bucket_bytes = 25.0 * 1024 * 1024;  // DP gradient bucket (launched as the backward produces it)
  // Reporting.
  double samples_per_step = 0, tokens_per_sample = 0, flops_per_step = 0;
  std::vector<double> memory_bytes;        // per pipeline rank: the total of its split
  std::vector<core::MemorySplit> memory;   // per pipeline rank: weights, grads, optimizer, activations
  // Per pipeline rank: the kernels of all its stages, one microbatch (what the roofline
  // timed; empty with a calibration or for uniform plans).
  std::vector<std::vector<core::Kernel>> kernels;
  std::string model;
};

// The layout the simulator runs: the plan's, for its own model or for `model_override`
// (one of core::known_models()), with `seq_len` tokens per sample when given.
core::RunLayout simulated_layout(const core::Plan& plan, const std::string& model_override = "", int seq_len = 0);

// From a run layout: each op's time is the roofline's (sim/roofline.h) over the kernels
// of its pipeline rank's stages (core/layer_kernels.h) and the optimizer's its bytes at
// memory bandwidth — or, with a calibration, the measured forward / backward speeds and
// optimizer time.  Throws core::UserError for a layout that does not fit the platform
// (too many ranks) — memory is checked by the caller.
StepCosts make_step_costs(const core::RunLayout& layout, const Platform& platform, const Calibration* calibration = nullptr);

// Uniform op times (seconds) on `pp` ranks, tp = dp = 1, messages of `p2p_bytes`.
StepCosts uniform_step_costs(core::ScheduleKind kind, int pp, int microbatches, int chunks, double tf, double tb,
                         double tw, double p2p_bytes = 0);

}  // namespace quintnet::sim
