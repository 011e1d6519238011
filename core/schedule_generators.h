#pragma once
// Generators for the pipeline schedules of core::Schedule.  Each decides only the
// order of the compute actions per rank; assemble_schedule() inserts the
// communication (a RECV right before the action that needs the data, a SEND right
// after the action that produced it), the per-chunk GRAD_SYNC and the OPTIMIZER_STEP.
#include <vector>

#include "core/schedule.h"

namespace quintnet::core {

// pp >= 1, microbatches >= 1, chunks >= 1 (chunks > 1 only for Interleaved);
// throws ConfigError naming the bad argument.
Schedule make_schedule(ScheduleKind kind, int pp, int microbatches, int chunks = 1);

// GPipe: all forwards, then all backwards.  Peak in-flight activations: m.
Schedule make_afab(int pp, int microbatches);
// PipeDream-flush 1F1B: p-r-1 warm-up forwards, then one forward / one backward.
Schedule make_1f1b(int pp, int microbatches);
// Megatron's interleaved 1F1B with `chunks` virtual stages per rank.
Schedule make_interleaved(int pp, int microbatches, int chunks);
// Zero-bubble ZB-H1 (Qi et al., 2024): 1F1B with the backward split into BI and BW,
// weight gradients deferred to fill the cool-down bubbles; same activation memory as 1F1B.
Schedule make_zb_h1(int pp, int microbatches);

// Evaluation: every microbatch forward through all stages, no backward, no optimizer
// step — each rank runs its (microbatch, chunk) forwards in that order, receiving each
// input just before and sending each output just after, as the training schedules do.
Schedule make_forward_only(int pp, int microbatches, int chunks = 1);

struct ComputeOp {
  ActionKind kind;  // Forward, Backward, BackwardInput or BackwardWeight
  int mb;
  int chunk = 0;
};

// Builds the full action lists from per-rank compute orders (see the header comment).
Schedule assemble_schedule(ScheduleKind kind, int pp, int microbatches, int chunks,
                           const std::vector<std::vector<ComputeOp>>& compute);

}  // namespace quintnet::core
