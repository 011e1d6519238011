#include "core/run_layout.h"

#include <algorithm>
#include <string>

#include "core/error.h"
#include "core/schedule_generators.h"

namespace quintnet::core {

RunLayout resolve_layout(const Plan& plan, std::optional<ModelDims> model) {
  RunLayout l(plan);
  l.dp = plan.dp(), l.tp = plan.tp(), l.pp = plan.pp(), l.cp = plan.cp();
  l.strategy = plan.strategy();
  l.axes = strategy_axes(l.strategy);
  if (l.axes.empty()) throw ConfigError(plan.source + ": strategy_name: unknown strategy '" + l.strategy + "'");
  l.chunks = l.uses(Axis::Pp) ? plan.virtual_stages : 1;
  l.microbatches = plan.microbatches();
  l.micro_batch_size = plan.micro_batch_size();
  l.schedule = make_schedule(plan.schedule_kind(), l.pp, l.microbatches, l.chunks);
  l.model = model ? *model : model_dims(plan.model, plan.max_seq_length);
  if (l.model.layers < l.stage_count())
    throw ConfigError("the model has " + std::to_string(l.model.layers) + " layers, fewer than the " +
                      std::to_string(l.stage_count()) + " pipeline stages");
  l.stages = balanced_stages(l.model, l.stage_count());
  return l;
}

bool RunLayout::uses(Axis axis) const {
  if (axis == Axis::Cp) return cp > 1;
  return std::find(axes.begin(), axes.end(), axis) != axes.end();
}

}  // namespace quintnet::core
