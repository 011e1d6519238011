#pragma once
// The models the executor trains, registered in one place: how to build one whole from
// a plan, what data it reads, the shape of the activations between its pipeline stages,
// whether it draws dropout masks, and what its epoch table reports.  Everything else
// (strategy, pipeline runner, trainer, checkpoints) sees a model only as a StageModel
// (exec/models/stage_model.h).  Adding a model: its StageModel and its entry in
// exec/models/<name>.cpp, listed in registry.cpp; its description (sizes, shape rules,
// plan keys) in core/models/<name>.cpp (docs/ARCHITECTURE.md).
#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "core/plan.h"
#include "exec/data/training_data.h"
#include "exec/models/serial_state.h"
#include "exec/models/stage_model.h"

namespace quintnet::exec {

struct ModelEntry {
  std::string kind;  // the plan's `model`
  // The whole, unsharded model, freshly initialised from the current seed (or loaded
  // from the plan's checkpoint_path where the model supports one).
  std::function<std::shared_ptr<StageModel>(const core::Plan&)> make_serial;
  std::function<std::unique_ptr<TrainingData>(const core::Plan&)> load_data;
  // Tokens of the activations between stages: [micro-batch, tokens, hidden].
  std::function<std::int64_t(const core::Plan&)> tokens;
  std::function<bool(const core::ModelConfig&)> has_dropout;
  bool language_model = false;  // the epoch table reports perplexity, not accuracy
  // The serial state in Hugging Face's names and layout (`quintnet-checkpoint export
  // --format safetensors`), its config.json; unset for a model without a Hugging Face twin.
  std::function<SerialState(const SerialState&, const core::ModelConfig&)> to_hugging_face;
  std::function<std::string(const core::ModelConfig&)> hugging_face_config;
};

// Each model's entry, beside its StageModel: exec/models/vit.cpp, gpt2.cpp, llama.cpp.
ModelEntry vit_model_entry();
ModelEntry gpt2_model_entry();
ModelEntry llama_model_entry();

// The plan's model; a UserError names the known kinds for any other.
const ModelEntry& model_entry(const core::ModelConfig& model);

}  // namespace quintnet::exec
