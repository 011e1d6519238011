#include "exec/models/registry.h"

#include <vector>

#include "core/error.h"

namespace quintnet::exec {

const ModelEntry& model_entry(const core::ModelConfig& model) {
  // One entry per model, each beside its StageModel (exec/models/<name>.cpp).
  static const std::vector<ModelEntry> entries = {vit_model_entry(), gpt2_model_entry(), llama_model_entry()};
  std::string known;
  for (const ModelEntry& e : entries) {
    if (e.kind == model.kind()) return e;
    known += (known.empty() ? "" : ", ") + e.kind;
  }
  throw core::UserError("model: '" + model.kind() + "' is not a model this executor trains (" + known + ")");
}

}  // namespace quintnet::exec
