// Loading a Plan from the keys of a config document.
#include "core/plan.h"

#include <optional>

#include "core/config_reader.h"
#include "core/error.h"
#include "core/model_kind.h"
#include "core/plan_keys.h"

namespace quintnet::core {
namespace {

// The block a key sits in: "model_config" for model_config.n_head, "" for a top-level key.
std::string block_of(const PlanKey& k) {
  const auto dot = k.name.find('.');
  return dot == std::string::npos ? "" : k.name.substr(0, dot);
}

// The keys a reader of `block` knows, as it names them (n_head); the top level also
// knows the model blocks themselves.
std::vector<std::string> known_keys(const std::string& block) {
  std::vector<std::string> out;
  for (const PlanKey& k : plan_keys())
    if (block_of(k) == block) out.push_back(block.empty() ? k.name : k.name.substr(block.size() + 1));
  if (block.empty())
    for (const ModelKind& kind : model_kinds())
      if (!kind.key_block.empty()) out.push_back(kind.key_block);
  return out;
}

LoadedPlan read_plan(ConfigReader& r, std::optional<int> world_size) {
  Plan p;
  p.source = r.origin();
  const std::vector<PlanKey>& keys = plan_keys();
  keys.front().read(r, p);  // `model`: which model keys apply
  const ModelKind& kind = model_kind(p.model.kind());
  for (const ModelKind& other : model_kinds())
    if (!other.key_block.empty() && other.key_block != kind.key_block && r.has(other.key_block))
      r.fail(other.key_block, other.key_block + " describes " + other.title + " but model is '" + kind.name +
                                  "'; remove one of them");
  std::optional<ConfigReader> block;
  if (!kind.key_block.empty()) block.emplace(r.child(kind.key_block));
  for (size_t i = 1; i < keys.size(); ++i) {
    const std::string b = block_of(keys[i]);
    if (b.empty()) keys[i].read(r, p);
    else if (b == kind.key_block) keys[i].read(*block, p);
  }
  std::vector<std::string> warnings;
  if (block) warnings = block->unknown_key_warnings(known_keys(kind.key_block));
  for (auto& w : r.unknown_key_warnings(known_keys(""))) warnings.push_back(std::move(w));
  LoadedPlan out{std::move(p), std::move(warnings)};
  validate_plan(out.plan, world_size);
  return out;
}

}  // namespace

std::vector<std::string> known_plan_keys() {
  std::vector<std::string> keys = known_keys("");
  for (const ModelKind& kind : model_kinds())
    if (!kind.key_block.empty())
      for (const auto& k : known_keys(kind.key_block)) keys.push_back(kind.key_block + "." + k);
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

int Plan::size(Axis axis) const {
  for (std::size_t i = 0; i < mesh_name.size() && i < mesh_dim.size(); ++i)
    if (mesh_name[i] == axis) return mesh_dim[i];
  return 1;
}

std::string Plan::strategy() const {
  if (!strategy_name.empty()) return strategy_name;
  const bool d = dp() > 1, t = tp() > 1, p = pp() > 1;
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
    const std::string block = block_of(k);
    if (block.empty())
      j[k.name] = std::move(v);
    else
      j[block][k.name.substr(block.size() + 1)] = std::move(v);
  }
  return j;
}

}  // namespace quintnet::core
