#include "core/hugging_face_config.h"

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "core/model_kind.h"
#include "core/plan_key_builders.h"

namespace quintnet::core {
namespace {

// The keys of a model's block: "llama_config.hidden_size" for the llama.
std::vector<const PlanKey*> block_keys(const ModelKind& kind) {
  std::vector<const PlanKey*> out;
  for (const PlanKey& k : plan_keys())
    if (k.model == kind.name && k.name.rfind(kind.key_block + ".", 0) == 0) out.push_back(&k);
  return out;
}

// What a config.json may ask that QuintNet's models do not do: refused rather than
// loaded into a model that computes something else.
void refuse_what_is_not_built(const nlohmann::json& file, const std::string& origin) {
  auto fail = [&](const std::string& what) { throw ConfigError(origin + ": " + what + " is not implemented"); };
  for (const char* key : {"rope_parameters", "rope_scaling"})
    if (file.contains(key) && file[key].is_object()) {
      const nlohmann::json& rope = file[key];
      const std::string type = rope.value("rope_type", rope.value("type", "default"));
      if (type != "default" && type != "llama3") fail("rotary scaling '" + type + "' (" + key + ")");
    }
  for (const char* key : {"attention_bias", "mlp_bias"})
    if (file.value(key, false)) fail(std::string(key) + ": true");
  if (file.contains("head_dim") && file["head_dim"].is_number_integer() && file.contains("hidden_size") &&
      file.contains("num_attention_heads") &&
      file["head_dim"].get<int>() * file["num_attention_heads"].get<int>() != file["hidden_size"].get<int>())
    fail("head_dim other than hidden_size / num_attention_heads");
}

}  // namespace

ModelConfig model_config_from_hugging_face(const std::string& json_text, const std::string& kind_name,
                                           const std::string& origin) {
  const ModelKind& kind = model_kind(kind_name);
  nlohmann::json file;
  try {
    file = nlohmann::json::parse(json_text);
  } catch (const std::exception& e) {
    throw ConfigError(origin + ": not JSON (" + e.what() + ")");
  }
  if (!file.is_object()) throw ConfigError(origin + ": not a JSON object");
  refuse_what_is_not_built(file, origin);
  // transformers 5 writes rope_theta and the scaling inside rope_parameters.
  if (file.contains("rope_parameters") && file["rope_parameters"].is_object()) {
    nlohmann::json rope = file["rope_parameters"];
    if ((!file.contains("rope_theta") || file["rope_theta"].is_null()) && rope.contains("rope_theta"))
      file["rope_theta"] = rope["rope_theta"];
    rope.erase("rope_theta");
    if (!file.contains("rope_scaling") || file["rope_scaling"].is_null()) file["rope_scaling"] = rope;
  }
  nlohmann::json block = nlohmann::json::object();
  for (const PlanKey* k : block_keys(kind)) {
    const std::string leaf = key_builders::leaf(k->name);
    if (file.contains(leaf) && !file[leaf].is_null()) block[leaf] = file[leaf];  // GPT2Config's n_inner may be null
  }
  const nlohmann::json plan = {{"model", kind.name}, {kind.key_block, block}};
  return parse_plan_json(plan, origin).plan.model;
}

std::vector<std::string> model_differences(const ModelConfig& file, const ModelConfig& plan) {
  Plan a, b;
  a.model = file, b.model = plan;
  std::vector<std::string> out;
  for (const PlanKey* k : block_keys(model_kind(plan.kind()))) {
    const nlohmann::json theirs = k->value(a), ours = k->value(b);
    if (theirs != ours)
      out.push_back(key_builders::leaf(k->name) + " " + theirs.dump() + " (the plan: " + ours.dump() + ")");
  }
  return out;
}

}  // namespace quintnet::core
