// Loading a Plan from the keys of a config document.
#include "core/plan.h"

#include "core/config_reader.h"
#include "core/error.h"

namespace quintnet::core {
namespace {

constexpr std::int64_t kMaxCount = std::int64_t{1} << 31;

const std::vector<std::string>& top_level_keys() {
  static const std::vector<std::string> keys = {
      // original QuintNet keys
      "dataset_path", "batch_size", "num_workers", "num_epochs", "learning_rate", "grad_acc_steps",
      "max_grad_norm", "patience", "img_size", "patch_size", "hidden_dim", "in_channels", "n_heads",
      "depth", "device_type", "mesh_dim", "mesh_name", "strategy_name", "schedule", "model_config",
      "warmup_steps", "max_samples", "max_val_samples", "checkpoint_path", "dataset_name",
      "max_seq_length", "max_target_length", "log_interval", "eval_interval", "save_interval",
      "output_dir",
      // QuintNet C++ keys
      "model", "num_classes", "dropout", "weight_decay", "seed", "virtual_stages", "bucket_size_mb",
      "tokenizer_path", "precision"};
  return keys;
}

const std::vector<std::string>& model_config_keys() {
  static const std::vector<std::string> keys = {
      "vocab_size", "n_positions", "n_embd", "n_layer", "n_head", "n_inner", "attn_pdrop",
      "embd_pdrop", "resid_pdrop", "layer_norm_epsilon"};
  return keys;
}

void read_gpt2(ConfigReader& r, ModelConfig& m) {
  m.vocab_size = static_cast<int>(r.get_int("vocab_size", m.vocab_size, 1, 1 << 24));
  m.n_positions = static_cast<int>(r.get_int("n_positions", m.n_positions, 1, 1 << 20));
  m.n_embd = static_cast<int>(r.get_int("n_embd", m.n_embd, 1, 1 << 20));
  m.n_layer = static_cast<int>(r.get_int("n_layer", m.n_layer, 1, 1 << 16));
  m.n_head = static_cast<int>(r.get_int("n_head", m.n_head, 1, 1 << 16));
  m.n_inner = static_cast<int>(r.get_int("n_inner", 4 * m.n_embd, 1, 1 << 22));
  m.attn_pdrop = r.get_double("attn_pdrop", m.attn_pdrop, 0.0, 0.99);
  m.embd_pdrop = r.get_double("embd_pdrop", m.embd_pdrop, 0.0, 0.99);
  m.resid_pdrop = r.get_double("resid_pdrop", m.resid_pdrop, 0.0, 0.99);
  m.layer_norm_epsilon = r.get_double("layer_norm_epsilon", m.layer_norm_epsilon, 1e-12, 1.0);
}

LoadedPlan read_plan(ConfigReader& r, std::optional<int> world_size) {
  Plan p;
  p.source = r.origin();
  ModelConfig& m = p.model;

  // Model kind: explicit `model`, else GPT-2 when a model_config block is present.
  const std::string kind = r.get_string("model", r.has("model_config") ? "gpt2" : "vit");
  if (kind != "vit" && kind != "gpt2")
    r.fail("model", "unknown model '" + kind + "'; choose vit or gpt2");
  m.kind = kind;
  std::vector<std::string> warnings;
  if (m.is_gpt()) {
    ConfigReader mc = r.child("model_config");
    read_gpt2(mc, m);
    warnings = mc.unknown_key_warnings(model_config_keys());
  } else if (r.has("model_config")) {
    r.fail("model_config", "model_config describes GPT-2 but model is 'vit'; remove one of them");
  }

  // GPT-2's default text (the Brown corpus) and tokenizer live in the project's data/
  // folder, which only the executor knows: empty here means "the default".
  p.dataset_path = r.get_string("dataset_path", m.is_gpt() ? "" : p.dataset_path);
  p.tokenizer_path = r.get_string("tokenizer_path", "");
  p.batch_size = static_cast<int>(r.get_int("batch_size", p.batch_size, 1, kMaxCount));
  r.accept("num_workers");  // a Python DataLoader setting; the C++ loader needs none
  r.get_int("num_workers", 0, 0, 1024);
  p.num_epochs = static_cast<int>(r.get_int("num_epochs", p.num_epochs, 1, 1 << 20));
  p.learning_rate = r.get_double("learning_rate", p.learning_rate, 1e-12, 10.0);
  p.grad_acc_steps = static_cast<int>(r.get_int("grad_acc_steps", p.grad_acc_steps, 1, 65536));
  p.max_grad_norm = r.get_double("max_grad_norm", p.max_grad_norm, 0.0, 1e9);
  p.patience = static_cast<int>(r.get_int("patience", p.patience, 0, 1 << 20));
  p.weight_decay = r.get_double("weight_decay", p.weight_decay, 0.0, 10.0);
  p.warmup_steps = static_cast<int>(r.get_int("warmup_steps", p.warmup_steps, 0, kMaxCount));
  p.seed = static_cast<std::uint64_t>(r.get_int("seed", static_cast<std::int64_t>(p.seed), 0, std::int64_t{1} << 62));
  p.max_samples = r.get_int("max_samples", 0, 0, std::int64_t{1} << 40);
  p.max_val_samples = r.get_int("max_val_samples", 0, 0, std::int64_t{1} << 40);

  m.img_size = static_cast<int>(r.get_int("img_size", m.img_size, 1, 1 << 16));
  m.patch_size = static_cast<int>(r.get_int("patch_size", m.patch_size, 1, 1 << 16));
  m.hidden_dim = static_cast<int>(r.get_int("hidden_dim", m.hidden_dim, 1, 1 << 20));
  m.in_channels = static_cast<int>(r.get_int("in_channels", m.in_channels, 1, 1024));
  m.n_heads = static_cast<int>(r.get_int("n_heads", m.n_heads, 1, 1 << 16));
  m.depth = static_cast<int>(r.get_int("depth", m.depth, 1, 1 << 16));
  m.num_classes = static_cast<int>(r.get_int("num_classes", m.num_classes, 2, 1 << 20));
  m.dropout = r.get_double("dropout", m.dropout, 0.0, 0.99);

  p.device_type = r.get_string("device_type", p.device_type);
  p.precision = r.get_string("precision", p.precision);
  p.mesh_dim = r.get_int_list("mesh_dim", p.mesh_dim);
  p.mesh_name = r.get_string_list("mesh_name", p.mesh_name);
  p.strategy_name = r.get_string("strategy_name", "");
  p.schedule = r.get_string("schedule", p.schedule);
  p.virtual_stages = static_cast<int>(r.get_int("virtual_stages", p.virtual_stages, 1, 64));
  p.bucket_size_mb = r.get_double("bucket_size_mb", p.bucket_size_mb, 1e-3, 1e6);

  p.dataset_name = r.get_string("dataset_name", "");
  p.max_seq_length = static_cast<int>(r.get_int("max_seq_length", p.max_seq_length, 1, 1 << 20));
  p.max_target_length = static_cast<int>(r.get_int("max_target_length", p.max_target_length, 0, 1 << 20));
  p.log_interval = static_cast<int>(r.get_int("log_interval", p.log_interval, 1, kMaxCount));
  p.eval_interval = static_cast<int>(r.get_int("eval_interval", p.eval_interval, 1, kMaxCount));
  p.save_interval = static_cast<int>(r.get_int("save_interval", p.save_interval, 1, kMaxCount));
  p.output_dir = r.get_string("output_dir", p.output_dir);
  p.checkpoint_path = r.get_string("checkpoint_path", "");

  for (auto& w : r.unknown_key_warnings(top_level_keys())) warnings.push_back(std::move(w));
  LoadedPlan out{std::move(p), std::move(warnings)};
  validate_plan(out.plan, world_size);
  return out;
}

}  // namespace

std::vector<std::string> known_plan_keys() {
  std::vector<std::string> keys = top_level_keys();
  for (const auto& k : model_config_keys()) keys.push_back("model_config." + k);
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
  nlohmann::json j = {
      {"dataset_path", dataset_path}, {"batch_size", batch_size}, {"num_epochs", num_epochs},
      {"learning_rate", learning_rate}, {"grad_acc_steps", grad_acc_steps}, {"max_grad_norm", max_grad_norm},
      {"patience", patience}, {"weight_decay", weight_decay}, {"warmup_steps", warmup_steps}, {"seed", seed},
      {"max_samples", max_samples}, {"max_val_samples", max_val_samples}, {"model", model.kind},
      {"device_type", device_type}, {"precision", precision}, {"mesh_dim", mesh_dim}, {"mesh_name", mesh_name},
      {"strategy_name", strategy()}, {"schedule", schedule}, {"virtual_stages", virtual_stages},
      {"bucket_size_mb", bucket_size_mb}, {"max_seq_length", max_seq_length},
      {"max_target_length", max_target_length}, {"log_interval", log_interval},
      {"eval_interval", eval_interval}, {"save_interval", save_interval}, {"output_dir", output_dir}};
  if (!dataset_name.empty()) j["dataset_name"] = dataset_name;
  if (!checkpoint_path.empty()) j["checkpoint_path"] = checkpoint_path;
  if (!tokenizer_path.empty()) j["tokenizer_path"] = tokenizer_path;
  if (model.is_gpt()) {
    j["model_config"] = {{"vocab_size", model.vocab_size}, {"n_positions", model.n_positions},
                         {"n_embd", model.n_embd}, {"n_layer", model.n_layer}, {"n_head", model.n_head},
                         {"n_inner", model.n_inner}, {"attn_pdrop", model.attn_pdrop},
                         {"embd_pdrop", model.embd_pdrop}, {"resid_pdrop", model.resid_pdrop},
                         {"layer_norm_epsilon", model.layer_norm_epsilon}};
  } else {
    j.update({{"img_size", model.img_size}, {"patch_size", model.patch_size}, {"hidden_dim", model.hidden_dim},
              {"in_channels", model.in_channels}, {"n_heads", model.n_heads}, {"depth", model.depth},
              {"num_classes", model.num_classes}, {"dropout", model.dropout}});
  }
  return j;
}

}  // namespace quintnet::core
