#pragma once
// Cutting a model's layers into pipeline stages by the cost model: contiguous layer
// ranges, at least one layer each, minimising the slowest stage's forward+backward
// FLOPs — the embedding counts on the first stage, the final norm and head (GPT's
// LM head costs ~4 GPT-2 layers) on the last.  With uniform layers and a cheap
// embedding and head this is the even split, earlier stages taking the remainder.
#include <string>
#include <vector>

#include "core/cost_model.h"

namespace quintnet::core {

struct LayerRange {
  int first = 0, end = 0;  // layers [first, end)
};

// Ranges of all `stages` stages (stage s of pp·v virtual stages lives on rank s mod pp).
// Throws ConfigError when there are fewer layers than stages.
std::vector<LayerRange> balanced_stages(const ModelDims& model, int stages);

// "stage FLOPs: 1.2 1.2 1.3 (max / mean 1.04)" — for a note when the split is uneven.
std::string stage_balance_note(const ModelDims& model, const std::vector<LayerRange>& ranges);

}  // namespace quintnet::core
