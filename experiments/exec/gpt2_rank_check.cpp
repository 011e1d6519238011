// One rank of the GPT-2 weight and tensor-parallel checks: a tool, not a test —
// tests/exec/gpt2_test.cpp starts it through quintnet-launch and asserts on its output.
//
//   gpt2_rank_check write FILE [VOCAB]    a seeded tiny GPT-2 (vocabulary 101, or VOCAB),
//                                         exported in Hugging Face layout (no launcher)
//   gpt2_rank_check run FILE OUT [EXPORT] load FILE into tp = world size (each rank its
//                                         slices), run fixed tokens forward and backward;
//                                         rank 0 saves logits, loss and the gathered
//                                         serial gradients to OUT, and with EXPORT writes
//                                         the model back in Hugging Face layout.
// The serial run (tp 1) also checks the vocabulary-parallel cross-entropy against
// torch's cross_entropy (loss and logits' gradient) and saves both.
// The Hugging Face reference tests run experiments/exec/hf_reference_check.cpp.
#include <torch/torch.h>

#include <cmath>
#include <cstdio>
#include <map>
#include <string>

#include "core/error.h"
#include "core/mesh.h"
#include "exec/comm/communicator.h"
#include "exec/launch/rank_env.h"
#include "exec/models/gpt2.h"
#include "exec/models/safetensors.h"

using namespace quintnet;

namespace {

core::Gpt2Config tiny() {
  core::Gpt2Config c;
  c.vocab_size = 101;  // odd: the vocabulary padding is exercised at tp 2
  c.n_positions = 32;
  c.n_embd = 32;
  c.n_layer = 2;
  c.n_head = 4;
  c.n_inner = 128;
  c.attn_pdrop = c.embd_pdrop = c.resid_pdrop = 0.0;  // deterministic forward passes to compare
  return c;
}

// GPT-2's forward pass written straight from the Hugging Face tensors, as the
// transformers library computes it (Conv1D: x @ W + b, W stored [in, out]): an
// independent reference for the model's layout mapping.
torch::Tensor reference_logits(const std::string& path, const torch::Tensor& tokens) {
  const exec::SafetensorsFile f(path);
  const core::Gpt2Config c = tiny();
  auto get = [&](const std::string& name) {
    const auto& e = f.entries().at(name);
    return f.read(name, e.shape);
  };
  auto conv1d = [&](const torch::Tensor& x, const std::string& name) {
    return torch::matmul(x, get(name + ".weight")) + get(name + ".bias");
  };
  auto layer_norm = [&](const torch::Tensor& x, const std::string& name) {
    return torch::layer_norm(x, {c.n_embd}, get(name + ".weight"), get(name + ".bias"), c.layer_norm_epsilon);
  };
  const int64_t b = tokens.size(0), t = tokens.size(1), hd = c.n_embd / c.n_head;
  torch::Tensor wte = get("wte.weight");
  torch::Tensor x = wte.index_select(0, tokens.reshape({-1})).reshape({b, t, c.n_embd}) + get("wpe.weight").narrow(0, 0, t);
  for (int i = 0; i < c.n_layer; ++i) {
    const std::string h = "h." + std::to_string(i) + ".";
    auto qkv = conv1d(layer_norm(x, h + "ln_1"), h + "attn.c_attn").split(c.n_embd, -1);
    auto heads = [&](const torch::Tensor& y) { return y.reshape({b, t, c.n_head, hd}).permute({0, 2, 1, 3}); };
    torch::Tensor w = torch::matmul(heads(qkv[0]), heads(qkv[1]).transpose(-1, -2)) / std::sqrt(double(hd));
    w = w.masked_fill(torch::ones({t, t}, torch::kBool).triu(1), -1e9).softmax(-1);
    torch::Tensor a = torch::matmul(w, heads(qkv[2])).permute({0, 2, 1, 3}).reshape({b, t, c.n_embd});
    x = x + conv1d(a, h + "attn.c_proj");
    torch::Tensor m = conv1d(layer_norm(x, h + "ln_2"), h + "mlp.c_fc");
    m = 0.5 * m * (1 + torch::tanh(std::sqrt(2.0 / M_PI) * (m + 0.044715 * m.pow(3))));  // gelu_new
    x = x + conv1d(m, h + "mlp.c_proj");
  }
  return torch::matmul(layer_norm(x, "ln_f"), wte.t());
}

void save(const std::string& path, const std::map<std::string, torch::Tensor>& tensors) {
  torch::serialize::OutputArchive archive;
  for (const auto& [name, t] : tensors) archive.write(name, t);
  archive.save_to(path);
}

}  // namespace

int main(int argc, char** argv) try {
  torch::set_num_threads(1);
  const std::string mode = argc > 1 ? argv[1] : "";
  if (mode == "write" && (argc == 3 || argc == 4)) {
    torch::manual_seed(11);
    core::Gpt2Config config = tiny();
    if (argc == 4) config.vocab_size = std::stoi(argv[3]);
    exec::Gpt2 model(config, exec::TpContext{});
    {  // non-trivial LayerNorm parameters, so a swapped weight and bias would show
      torch::NoGradGuard no_grad;
      for (auto& p : model->named_parameters())
        if (p.key().find("ln") != std::string::npos) p.value().add_(torch::randn(p.value().sizes()) * 0.1);
    }
    exec::write_safetensors(argv[2], exec::to_hf_gpt2(exec::gather_serial_state(*model, {}), config),
                            {{"format", "pt"}});
    return 0;
  }
  if (mode != "run" || argc < 4) {
    std::fprintf(stderr, "usage: gpt2_rank_check write FILE [VOCAB] | run FILE OUT [EXPORT]\n");
    return 2;
  }
  const exec::RankEnv env = exec::read_rank_env();
  exec::Communicator comm(env, core::Mesh::from_axes({env.world_size}, {core::Axis::Tp}), core::Device::Cpu, std::chrono::seconds(60));
  const exec::TpContext tp = env.world_size > 1 ? exec::TpContext{&comm, &comm.axis(core::Axis::Tp)} : exec::TpContext{};
  exec::Gpt2 model(tiny(), tp);
  exec::load_hf_gpt2(model, argv[2]);

  torch::manual_seed(5);
  const torch::Tensor tokens = torch::randint(0, tiny().vocab_size, {3, 17});
  torch::Tensor targets = torch::randint(0, tiny().vocab_size, {3, 17});
  targets.index_put_({0, 0}, -100);  // an ignored position
  torch::Tensor local = model(tokens);
  local.retain_grad();
  torch::Tensor loss = model->token_loss(local, targets);
  loss.backward();
  std::map<std::string, torch::Tensor> result{{"logits", model->full_logits(local)}, {"loss", loss.detach()}};
  for (auto& [name, g] : exec::gather_serial_state(*model, tp, /*gradients=*/true)) result["grad." + name] = g;
  if (tp.size() == 1) {  // the reference: torch's own cross-entropy on the same logits
    torch::Tensor z = local.detach().clone().requires_grad_(true);
    torch::Tensor ref = torch::nn::functional::cross_entropy(
        z.reshape({-1, tiny().vocab_size}), targets.reshape({-1}),
        torch::nn::functional::CrossEntropyFuncOptions().ignore_index(-100));
    ref.backward();
    result["torch_loss"] = ref.detach();
    result["torch_logits_grad"] = z.grad();
    result["logits_grad"] = local.grad();
    result["reference_logits"] = reference_logits(argv[2], tokens);
  }
  const exec::SerialState serial = exec::gather_serial_state(*model, tp);
  if (env.rank == 0) {
    save(argv[3], result);
    if (argc > 4) exec::write_safetensors(argv[4], exec::to_hf_gpt2(serial, tiny()), {{"format", "pt"}});
  }
  return 0;
} catch (const core::UserError& e) {
  std::fprintf(stderr, "error: %s\n", e.what());
  return 2;
}
