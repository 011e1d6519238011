// One rank of the Hugging Face reference tests (tests/peers/hf_gpt2_reference.py,
// hf_llama_reference.py): a tool, not a test — the Python side starts it through
// quintnet-launch and compares what it writes with transformers' own results.
//
//   hf_reference_check CONFIG WEIGHTS INPUTS OUT PP
//     CONFIG   the model's config.json as transformers wrote it (model_type gpt2 or llama)
//     WEIGHTS  its model.safetensors
//     INPUTS   safetensors with "tokens" and "targets" [3, 17] (stored as F32)
//     PP       pipeline stages; world = PP × tp ranks, the stages passing activations
//              and their gradients
//   Rank 0 writes OUT (safetensors): the full logits, the loss and every gradient under
//   its Hugging Face name and layout ("grad.model.layers.0.self_attn.q_proj.weight").
#include <torch/torch.h>

#include <cstdio>
#include <fstream>
#include <map>
#include <string>

#include "core/error.h"
#include "core/hugging_face_config.h"
#include "core/mesh.h"
#include "exec/comm/communicator.h"
#include "exec/launch/rank_env.h"
#include "exec/models/gpt2.h"
#include "exec/models/llama.h"
#include "exec/models/registry.h"
#include "exec/models/safetensors.h"

using namespace quintnet;

namespace {

core::ModelConfig read_config(const std::string& path) {
  std::ifstream in(path);
  if (!in) throw core::UserError(path + ": cannot read it");
  const std::string text((std::istreambuf_iterator<char>(in)), {});
  const std::string kind = nlohmann::json::parse(text).value("model_type", "");
  return core::model_config_from_hugging_face(text, kind, path);
}

// Layers `range` of the model with this rank's shards of the file's weights.
std::shared_ptr<exec::LanguageModel> load_stage(const core::ModelConfig& c, const exec::TpContext& tp,
                                             exec::StageRange range, const std::string& weights) {
  if (c.is<core::Gpt2Config>()) {
    exec::Gpt2 model(c.as<core::Gpt2Config>(), tp, range);
    exec::load_hf_gpt2(model, weights);
    return model.ptr();
  }
  exec::Llama model(c.as<core::LlamaConfig>(), tp, range);
  exec::load_hf_llama(model, weights);
  return model.ptr();
}

void sum_over(exec::Communicator& comm, exec::Group& group, const std::vector<torch::Tensor>& params) {
  for (const torch::Tensor& p : params) {
    torch::Tensor g = p.grad();
    comm.all_reduce_sum(group, g);
  }
}

int run(const std::string& config_path, const std::string& weights, const std::string& inputs, const std::string& out,
        int pp) {
  const exec::RankEnv env = exec::read_rank_env();
  // Two stages at most: then both hold GPT-2's tied token embedding (a middle stage would not).
  if (pp < 1 || pp > 2 || env.world_size % pp != 0) throw core::UserError("PP must be 1 or 2 and divide the world size");
  const core::Mesh mesh = core::Mesh::from_axes({pp, env.world_size / pp}, {core::Axis::Pp, core::Axis::Tp});
  exec::Communicator comm(env, mesh, core::Device::Cpu, std::chrono::seconds(60));
  const exec::TpContext tp = mesh.size(core::Axis::Tp) > 1 ? exec::TpContext{&comm, &comm.axis(core::Axis::Tp)} : exec::TpContext{};
  const core::ModelConfig config = read_config(config_path);
  const int stage = mesh.coord(env.rank, core::Axis::Pp), layers = config.layers();
  auto model = load_stage(config, tp, exec::StageRange{stage * layers / pp, (stage + 1) * layers / pp}, weights);

  const exec::SafetensorsFile in(inputs);
  const torch::Tensor tokens = in.read("tokens", {3, 17}).to(torch::kLong);
  const torch::Tensor targets = in.read("targets", {3, 17}).to(torch::kLong);
  exec::Group& pipe = comm.axis(core::Axis::Pp);
  torch::Tensor input = tokens;
  if (stage > 0) {  // the previous stage's activations, as a leaf whose gradient goes back
    input = torch::empty({3, 17, config.hidden()});
    comm.recv(pipe, input, stage - 1, /*tag=*/0);
    input.requires_grad_(true);
  }
  torch::Tensor output = model->forward(input);
  std::map<std::string, torch::Tensor> result;
  if (stage + 1 < pp) {
    torch::Tensor activation = output.detach().contiguous();
    comm.wait(*comm.send_async(pipe, activation, stage + 1, /*tag=*/0), "activation");
    torch::Tensor grad = torch::empty_like(activation);
    comm.recv(pipe, grad, stage + 1, /*tag=*/1);
    output.backward(grad);
  } else {
    torch::Tensor loss = model->loss(output, targets).loss;
    loss.backward();
    result["logits"] = model->full_logits(output);
    result["loss"] = loss.detach().reshape({1});
    if (stage > 0) {
      torch::Tensor grad = input.grad().contiguous();
      comm.wait(*comm.send_async(pipe, grad, stage - 1, /*tag=*/1), "activation gradient");
    }
  }
  // As the trainer does: tied parameters summed over the pipeline (GPT-2's embedding),
  // partial gradients over tp (Llama's key/value weights held whole where tp exceeds them).
  if (pp > 1) sum_over(comm, pipe, model->tied_parameters());
  if (tp.size() > 1) sum_over(comm, comm.axis(core::Axis::Tp), model->partial_gradient_parameters());
  // Each stage's gradients in serial layout (gathered over tp) travel to rank 0 through
  // files; rank 0 puts the stages together and names them as transformers does.
  exec::SerialState grads = exec::gather_serial_state(*model, tp, /*gradients=*/true);
  if (mesh.coord(env.rank, core::Axis::Tp) == 0) {
    for (auto& [name, t] : result) grads["result." + name] = t;
    exec::write_safetensors(out + ".stage" + std::to_string(stage), grads, {});
  }
  comm.barrier(comm.world());
  if (env.rank != 0) return 0;
  exec::SerialState all;
  std::map<std::string, torch::Tensor> file;
  for (int s = 0; s < pp; ++s) {
    const std::string part = out + ".stage" + std::to_string(s);
    const exec::SafetensorsFile f(part);
    for (const auto& [name, e] : f.entries()) {
      torch::Tensor t = f.read(name, e.shape);
      if (name.rfind("result.", 0) == 0) file[name.substr(7)] = t;
      else all[name] = t;
    }
    std::remove(part.c_str());
  }
  for (auto& [name, t] : exec::model_entry(config).to_hugging_face(all, config)) file["grad." + name] = t;
  exec::write_safetensors(out, file, {});
  return 0;
}

}  // namespace

int main(int argc, char** argv) try {
  torch::set_num_threads(1);
  if (argc != 6) {
    std::fprintf(stderr, "usage: hf_reference_check CONFIG WEIGHTS INPUTS OUT PP\n");
    return 2;
  }
  return run(argv[1], argv[2], argv[3], argv[4], std::stoi(argv[5]));
} catch (const core::UserError& e) {
  std::fprintf(stderr, "error: %s\n", e.what());
  return 2;
}
