#pragma once
// A Hugging Face config.json (GPT2Config, LlamaConfig) read as a plan's model block: the
// keys of the model's block (core/models/<name>.cpp names them as transformers does) are
// taken from it, the rest (architectures, torch_dtype, token ids, ...) ignored.  Used
// where weights come with their config: a checkpoint_path's config.json is checked
// against the plan, and the reference tests build the model the file describes.
#include <string>
#include <vector>

#include "core/plan.h"

namespace quintnet::core {

// `kind`: "gpt2" or "llama".  Throws ConfigError naming `origin` (not JSON, a value out
// of range, a model whose shapes do not hold).
ModelConfig model_config_from_hugging_face(const std::string& json_text, const std::string& kind,
                                           const std::string& origin);

// The keys of `kind`'s block whose values differ, as "num_key_value_heads 2 (the plan: 4)".
std::vector<std::string> model_differences(const ModelConfig& file, const ModelConfig& plan);

}  // namespace quintnet::core
