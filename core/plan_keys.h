#pragma once
// Every plan key, declared once: its name, section, type, range and meaning, and how
// it is read into a Plan and written out of one.  The loader (core/plan.cpp), the
// writer (Plan::to_json), the known-key list behind "did you mean" warnings and the key
// tables of docs/CONFIG.md (`quintnet check-config --keys`; a test checks they agree)
// all come from this table.  Defaults are the member initialisers of core/plan.h.
#include <functional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/config_reader.h"
#include "core/plan.h"

namespace quintnet::core {

struct PlanKey {
  std::string name;     // as a config writes it: "batch_size", "model_config.n_head"
  std::string section;  // the docs' grouping: "Training", "Model: ViT", ...
  std::string type;     // integer, number, text, list of integers, list of names
  std::string range;    // for the docs: "1 to 65536", "vit or gpt2", "" (any)
  std::string help;
  std::string model;     // the model kind it describes ("gpt2"), or "" for every plan's keys
  bool original = true;  // a key of the original Python QuintNet configs
  std::string default_text;  // the docs' default when the plan's own would mislead ("4 × n_embd")
  // Reads the key (from the model_config block's reader for model_config.* keys).
  std::function<void(ConfigReader&, Plan&)> read;
  // The plan's value; null when the plan does not write it (another model's key, an
  // unset optional path, a key read for compatibility only).
  std::function<nlohmann::json(const Plan&)> value;
};

// In reading order: `model` first (it decides which model keys apply).
const std::vector<PlanKey>& plan_keys();

// The key tables of docs/CONFIG.md, one per section, as markdown.
std::string plan_keys_markdown();

}  // namespace quintnet::core
