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
//
//   gpt2_rank_check reference FILE INPUTS OUT PP
//                                         the Hugging Face reference test's side
//                                         (tests/peers/hf_gpt2_reference.py): FILE written by
//                                         transformers, INPUTS its tokens and targets
//                                         (safetensors, stored as F32); world = PP x tp
//                                         ranks, PP pipeline stages passing activations
//                                         and their gradients; rank 0 writes OUT
//                                         (safetensors): logits, loss and every gradient
//                                         under its Hugging Face name and layout.
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

core::ModelConfig tiny() {
  core::ModelConfig c;
  c.kind = "gpt2";
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
  const core::ModelConfig c = tiny();
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

// One forward and backward pass through `pp` stages of tp ranks each; rank 0 writes the
// logits, the loss and the serial gradients in Hugging Face layout.
int run_reference(const std::string& weights, const std::string& inputs, const std::string& out, int pp) {
  const exec::RankEnv env = exec::read_rank_env();
  // Two stages at most: then both hold the tied token embedding (a middle stage would not).
  if (pp < 1 || pp > 2 || env.world_size % pp != 0)
    throw core::UserError("reference: PP must be 1 or 2 and divide the world size");
  const core::Mesh mesh = core::Mesh::from_axes({pp, env.world_size / pp}, {core::Axis::Pp, core::Axis::Tp});
  exec::Communicator comm(env, mesh, core::Device::Cpu, std::chrono::seconds(60));
  const exec::TpContext tp = mesh.size(core::Axis::Tp) > 1 ? exec::TpContext{&comm, &comm.axis(core::Axis::Tp)} : exec::TpContext{};
  const core::ModelConfig config = tiny();
  const int stage = mesh.coord(env.rank, core::Axis::Pp);
  exec::Gpt2 model(config, tp, exec::StageRange{stage * config.n_layer / pp, (stage + 1) * config.n_layer / pp});
  exec::load_hf_gpt2(model, weights);

  const exec::SafetensorsFile in(inputs);
  const torch::Tensor tokens = in.read("tokens", {3, 17}).to(torch::kLong);
  const torch::Tensor targets = in.read("targets", {3, 17}).to(torch::kLong);
  exec::Group& pipe = comm.axis(core::Axis::Pp);
  torch::Tensor input = tokens;
  if (stage > 0) {  // the previous stage's activations, as a leaf whose gradient goes back
    input = torch::empty({3, 17, config.n_embd});
    comm.recv(pipe, input, stage - 1, /*tag=*/0);
    input.requires_grad_(true);
  }
  torch::Tensor output = model(input);
  std::map<std::string, torch::Tensor> result;
  if (stage + 1 < pp) {
    torch::Tensor activation = output.detach().contiguous();
    comm.wait(*comm.send_async(pipe, activation, stage + 1, /*tag=*/0), "activation");
    torch::Tensor grad = torch::empty_like(activation);
    comm.recv(pipe, grad, stage + 1, /*tag=*/1);
    output.backward(grad);
  } else {
    torch::Tensor loss = model->token_loss(output, targets);
    loss.backward();
    result["logits"] = model->full_logits(output);
    result["loss"] = loss.detach().reshape({1});
    if (stage > 0) {
      torch::Tensor grad = input.grad().contiguous();
      comm.wait(*comm.send_async(pipe, grad, stage - 1, /*tag=*/1), "activation gradient");
    }
  }
  // GPT-2 ties the head to the token embedding: with pp 2 both stages hold a copy, whose
  // gradients add up (as PipelineRunner::sync_tied_gradients does).
  if (pp > 1)
    for (torch::Tensor& w : model->tied_parameters()) {
      torch::Tensor g = w.grad();
      comm.all_reduce_sum(pipe, g);
    }
  // Each stage's gradients in serial layout (gathered over tp) travel to rank 0 through
  // the rendezvous store; rank 0 puts the stages together and names them as transformers does.
  exec::SerialState grads = exec::gather_serial_state(*model, tp, /*gradients=*/true);
  const std::string mine = mesh.coord(env.rank, core::Axis::Tp) == 0 ? out + ".stage" + std::to_string(stage) : "";
  if (!mine.empty()) {
    for (auto& [name, t] : result) grads["result." + name] = t;
    exec::write_safetensors(mine, grads, {});
  }
  comm.barrier(comm.world());
  if (env.rank != 0) return 0;
  exec::SerialState all;
  std::map<std::string, torch::Tensor> outputs;
  for (int s = 0; s < pp; ++s) {
    const exec::SafetensorsFile f(out + ".stage" + std::to_string(s));
    for (const auto& [name, e] : f.entries()) {
      torch::Tensor t = f.read(name, e.shape);
      if (name.rfind("result.", 0) == 0) outputs[name.substr(7)] = t;
      else all[name] = t;
    }
    std::remove((out + ".stage" + std::to_string(s)).c_str());
  }
  exec::SerialState hf = exec::to_hf_gpt2(all, config);
  exec::SerialState file;
  for (auto& [name, t] : hf) file["grad." + name] = t;
  for (auto& [name, t] : outputs) file[name] = t;
  exec::write_safetensors(out, file, {});
  return 0;
}

}  // namespace

int main(int argc, char** argv) try {
  torch::set_num_threads(1);
  const std::string mode = argc > 1 ? argv[1] : "";
  if (mode == "write" && (argc == 3 || argc == 4)) {
    torch::manual_seed(11);
    core::ModelConfig config = tiny();
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
  if (mode == "reference" && argc == 6) return run_reference(argv[2], argv[3], argv[4], std::stoi(argv[5]));
  if (mode != "run" || argc < 4) {
    std::fprintf(stderr, "usage: gpt2_rank_check write FILE [VOCAB] | run FILE OUT [EXPORT] | reference FILE INPUTS OUT PP\n");
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
