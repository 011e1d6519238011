#pragma once
// core::ModelKind — everything core knows of a model a plan can name, one description
// per model (core/models/<name>.cpp), listed in core/model_kind.cpp: where its keys sit
// in a config and the keys themselves, which keys give its sizes (named in messages),
// its default data, its sizes, its layer shapes for the cost model and the shape checks
// only it needs.  Nothing else in core asks which model a plan holds.  The executor's
// side of a model is exec/models/registry.cpp.
#include <functional>
#include <string>
#include <vector>

#include "core/cost_model.h"
#include "core/plan.h"
#include "core/plan_keys.h"

namespace quintnet::core {

// A shape rule of one model: `value` (the key `key`) must be divisible by `by` (named `by_key`).
struct Divisibility {
  std::string key;
  int value;
  std::string by_key;
  int by;
  std::string fix;  // what to do instead
};

// A condition a model puts on one feature: refused by `key` with `message` unless `met`.
struct Requirement {
  std::string key;
  bool met;
  std::string message;
};

struct ModelKind {
  std::string name;             // the plan's `model`
  ModelConfig defaults;         // its settings when the plan gives none of its keys
  std::string title;            // for messages: "a ViT", "GPT-2"
  std::string key_block;        // the block holding its keys ("model_config"), or "" (top level)
  std::string default_dataset;  // "" leaves the choice to the executor (a data/ folder)
  std::string layers_key, heads_key, hidden_key;  // the keys of its sizes
  std::function<ModelDims(const ModelConfig&, int seq_len)> dims;  // its sizes and the cost model's view
  std::function<std::vector<Divisibility>(const ModelConfig&, int tp)> rules;  // besides heads and tp
  // Whether its sequences may be split over a cp axis (a causal decoder: each cp rank
  // computes its two chunks' positions — rotary angles or rows of a learned table — and
  // attends through the ring), and what it then asks of its settings.
  bool context_parallel = false;
  std::function<std::vector<Requirement>(const ModelConfig&)> context_parallel_requirements;
  std::string key_section;  // its keys' section of docs/CONFIG.md ("Model: ViT")
  std::function<void(std::vector<PlanKey>&)> add_keys;  // declares its plan keys (core/plan_key_builders.h)
};

// Each model's description, one file per model: core/models/vit.cpp, gpt2.cpp, llama.cpp.
ModelKind vit_model_kind();
ModelKind gpt2_model_kind();
ModelKind llama_model_kind();

const std::vector<ModelKind>& model_kinds();
// Throws ConfigError naming the known kinds.
const ModelKind& model_kind(const std::string& name);
std::string model_kind_names(const std::string& separator);  // "vit or gpt2"

}  // namespace quintnet::core
