// Loading a Plan from the keys of a config document.
#include "core/plan.h"

#include <optional>

#include "core/config_reader.h"
#include "core/error.h"
#include "core/plan_keys.h"

namespace quintnet::core {
namespace {

bool in_model_config(const PlanKey& k) { return k.name.rfind("model_config.", 0) == 0; }

// The model_config block's keys as its reader names them (n_head), or the top level's
// (with the block itself).
std::vector<std::string> known_keys(bool block) {
  std::vector<std::string> out;
  for (const PlanKey& k : plan_keys())
    if (in_model_config(k) == block) out.push_back(block ? k.name.substr(k.name.find('.') + 1) : k.name);
  if (!block) out.push_back("model_config");
  return out;
}

LoadedPlan read_plan(ConfigReader& r, std::optional<int> world_size) {
  Plan p;
  p.source = r.origin();
  const std::vector<PlanKey>& keys = plan_keys();
  keys.front().read(r, p);  // `model`: which model keys apply
  std::optional<ConfigReader> block;
  if (p.model.is_gpt())
    block.emplace(r.child("model_config"));
  else if (r.has("model_config"))
    r.fail("model_config", "model_config describes GPT-2 but model is 'vit'; remove one of them");
  for (size_t i = 1; i < keys.size(); ++i) {
    if (!in_model_config(keys[i])) keys[i].read(r, p);
    else if (block) keys[i].read(*block, p);
  }
  std::vector<std::string> warnings;
  if (block) warnings = block->unknown_key_warnings(known_keys(true));
  for (auto& w : r.unknown_key_warnings(known_keys(false))) warnings.push_back(std::move(w));
  LoadedPlan out{std::move(p), std::move(warnings)};
  validate_plan(out.plan, world_size);
  return out;
}

}  // namespace

std::vector<std::string> known_plan_keys() {
  std::vector<std::string> keys = known_keys(false);
  for (const auto& k : known_keys(true)) keys.push_back("model_config." + k);
  return keys;
}

LoadedPlan load_plan(const std::string& path, std::optional<int> world_size) {
  ConfigReader r = ConfigReader::from_file(path);
  return read_plan(r, world_size);
}

LoadedPlan parse_plan_text(const std::string& text, const std::string& origin, std::optional<int> world_size) {
  ConfigReader r = ConfigReader::from_text(text, origin);
  return read_plan(r, world_size);
}

LoadedPlan parse_plan_json(const nlohmann::json& doc, const std::string& origin, std::optional<int> world_size) {
  ConfigReader r(doc, origin);
  return read_plan(r, world_size);
}

int Plan::world_size() const {
  int n = 1;
  for (int d : mesh_dim) n *= d;
  return n;
}

std::string Plan::strategy() const {
  if (!strategy_name.empty()) return strategy_name;
  const Mesh m = mesh();
  const bool d = m.size("dp") > 1, t = m.size("tp") > 1, p = m.size("pp") > 1;
  if (d && t && p) return "3d";
  if (d && t) return "dp_tp";
  if (d && p) return "dp_pp";
  if (t && p) return "tp_pp";
  if (t) return "tp";
  if (p) return "pp";
  return "dp";
}

nlohmann::json Plan::to_json() const {
  nlohmann::json j = nlohmann::json::object();
  for (const PlanKey& k : plan_keys()) {
    nlohmann::json v = k.value(*this);
    if (v.is_null()) continue;
    if (in_model_config(k))
      j["model_config"][k.name.substr(k.name.find('.') + 1)] = std::move(v);
    else
      j[k.name] = std::move(v);
  }
  return j;
}

}  // namespace quintnet::core
