#pragma once
// core::RunLayout — a plan resolved once: what both backends take.  The loader
// (core::load_plan) reads and validates a config's keys into a core::Plan;
// resolve_layout derives from it, in one place, everything the executor and the
// simulator used to work out each for itself: the mesh (named axes, core::Axis), the
// size of each axis, the pipeline schedule every pipeline rank interprets, the model's
// dimensions (from its description, core/models/) and the layers of each pipeline stage.
// The plan's options are typed already (core/run_options.h).
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "core/cost_model.h"
#include "core/mesh.h"
#include "core/plan.h"
#include "core/schedule.h"
#include "core/stage_balance.h"

namespace quintnet::core {

struct RunLayout {
  explicit RunLayout(Plan p) : plan(std::move(p)), mesh(plan.mesh()) {}

  Plan plan;  // every key as loaded: the training settings, paths, options, the model's config
  Mesh mesh;
  int dp = 1, tp = 1, pp = 1, cp = 1;
  std::string strategy;     // dp, tp, pp, dp_tp, dp_pp, tp_pp or 3d (the plan's, or the mesh's)
  std::vector<Axis> axes;   // the axes the strategy parallelises over
  // Virtual stages per pipeline rank: the interleaved schedule's v where the strategy
  // pipelines, else 1.
  int chunks = 1;
  int microbatches = 1, micro_batch_size = 1;
  Schedule schedule;  // what every pipeline rank interprets
  ModelDims model;    // the model's sizes and the cost model's view of it
  std::vector<LayerRange> stages;  // the layers of each of the pp · chunks virtual stages

  int world_size() const { return mesh.world_size(); }
  int stage_count() const { return pp * chunks; }
  // Whether the strategy parallelises over `axis`; cp, whatever the strategy, where cp > 1.
  bool uses(Axis axis) const;
  // The ranks that hold the same weights and average their gradients: dp × cp.
  int replicas() const { return dp * cp; }
};

// Resolves a plan that core::load_plan (or core::validate_plan, for a plan built in
// code) has validated.  `model` stands in for the plan's model dimensions (the
// simulator's --model and --seq); the stages are cut for it.  Throws ConfigError when
// the model has fewer layers than the pipeline has stages.
RunLayout resolve_layout(const Plan& plan, std::optional<ModelDims> model = std::nullopt);

}  // namespace quintnet::core
