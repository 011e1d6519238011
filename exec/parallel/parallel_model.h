#pragma once
// ParallelModel — this rank's part of the parallel model: its tensor-parallel group
// and its chunks (virtual pipeline stages), each with its parameters and gradients in
// flat buffers and, with data parallelism, its gradient buckets.  Built by a strategy
// (exec/parallel/strategy.h); run by the pipeline (exec/pp/), checkpointed
// (exec/checkpoint/) and trained (exec/train/).
#include <memory>
#include <vector>

#include "exec/dp/flat_parameters.h"
#include "exec/dp/grad_buckets.h"
#include "exec/models/stage_model.h"

namespace quintnet::exec {

// One virtual pipeline stage held by this rank.
struct ModelChunk {
  int stage = 0;  // virtual stage index: chunk c of pp rank r is stage c·pp + r
  StageRange range;  // its blocks
  std::shared_ptr<StageModel> model;
  std::unique_ptr<FlatParameters> flat;  // parameters and gradients in two buffers
  std::unique_ptr<GradBuckets> dp;       // gradient averaging over the dp group (null if dp = 1)
};

struct ParallelModel {
  TpContext tp;
  int num_stages = 1;  // pp · chunks
  std::vector<ModelChunk> chunks;

  bool is_first(int chunk) const { return chunks[chunk].stage == 0; }
  bool is_last(int chunk) const { return chunks[chunk].stage == num_stages - 1; }
};

}  // namespace quintnet::exec
