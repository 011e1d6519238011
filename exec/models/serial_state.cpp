#include "exec/models/serial_state.h"

#include "core/error.h"
#include "exec/tp/parallel_linear.h"
#include "exec/tp/vocab_parallel.h"

namespace quintnet::exec {
namespace {

// Names of the vocabulary-parallel weights and the size of their real vocabulary.
std::map<std::string, const VocabParallelEmbeddingImpl*> vocab_weights(torch::nn::Module& model) {
  std::map<std::string, const VocabParallelEmbeddingImpl*> out;
  for (const auto& item : model.named_modules())
    if (auto* v = dynamic_cast<const VocabParallelEmbeddingImpl*>(item.value().get()))
      out[(item.key().empty() ? "" : item.key() + ".") + "weight"] = v;
  return out;
}

}  // namespace

std::map<std::string, int> tp_shard_dims(torch::nn::Module& model) {
  std::map<std::string, int> dims;
  for (const auto& item : model.named_modules()) {
    const std::string prefix = item.key().empty() ? "" : item.key() + ".";
    auto* m = item.value().get();
    if (dynamic_cast<ColumnParallelLinearImpl*>(m)) {
      dims[prefix + "weight"] = dims[prefix + "bias"] = ColumnParallelLinearImpl::kWeightShardDim;
    } else if (dynamic_cast<QkvParallelLinearImpl*>(m)) {
      dims[prefix + "weight"] = dims[prefix + "bias"] = QkvParallelLinearImpl::kWeightShardDim;
    } else if (dynamic_cast<RowParallelLinearImpl*>(m)) {
      dims[prefix + "weight"] = RowParallelLinearImpl::kWeightShardDim;
    } else if (dynamic_cast<VocabParallelEmbeddingImpl*>(m)) {
      dims[prefix + "weight"] = 0;
    } else if (auto* kv = dynamic_cast<KeyValueParallelLinearImpl*>(m); kv && kv->sharded()) {
      dims[prefix + "weight"] = KeyValueParallelLinearImpl::kWeightShardDim;  // else replicated: held whole
    }
  }
  return dims;
}

std::map<std::string, std::int64_t> vocabulary_rows(torch::nn::Module& model) {
  std::map<std::string, std::int64_t> rows;
  for (const auto& [name, v] : vocab_weights(model)) rows[name] = v->vocab();
  return rows;
}

std::vector<torch::Tensor> replicated_parameters(torch::nn::Module& model) {
  const auto sharded = tp_shard_dims(model);
  std::vector<torch::Tensor> out;
  for (const auto& p : model.named_parameters())
    if (!sharded.count(p.key())) out.push_back(p.value());
  return out;
}

TpSlicer::TpSlicer(torch::nn::Module& model) : dims_(tp_shard_dims(model)), vocab_(vocab_weights(model)) {}

torch::Tensor TpSlicer::slice(const std::string& name, const torch::Tensor& full, c10::IntArrayRef shard,
                              const TpContext& tp, const std::string& what) const {
  auto bad_shape = [&] {
    return core::UserError(what + " has shape " + c10::str(full.sizes()) + ", which does not fit this model (shard " +
                           c10::str(shard) + " at tp " + std::to_string(tp.size()) + ")");
  };
  if (auto v = vocab_.find(name); v != vocab_.end()) {
    const VocabShard& s = v->second->shard();
    if (full.dim() != 2 || shard.size() != 2 || full.size(0) < v->second->vocab() || full.size(1) != shard[1])
      throw bad_shape();
    torch::Tensor rows = torch::zeros(shard, full.options());
    if (s.valid > 0) rows.narrow(0, 0, s.valid).copy_(full.narrow(0, s.first, s.valid));
    return rows;
  }
  torch::Tensor part = full;
  if (auto d = dims_.find(name); d != dims_.end()) {
    if (full.dim() <= d->second || full.size(d->second) % tp.size() != 0) throw bad_shape();
    part = full.chunk(tp.size(), d->second)[tp.rank()];
  }
  if (part.sizes() != shard) throw bad_shape();
  return part;
}

void load_serial_state(torch::nn::Module& model, const SerialState& state, const TpContext& tp) {
  const TpSlicer slicer(model);
  torch::NoGradGuard no_grad;
  for (auto& item : model.named_parameters()) {
    auto it = state.find(item.key());
    if (it == state.end()) throw core::UserError("weights: tensor '" + item.key() + "' is missing");
    item.value().copy_(slicer.slice(item.key(), it->second, item.value().sizes(), tp, "weights: tensor '" + item.key() + "'"));
  }
}

SerialState gather_serial_state(torch::nn::Module& model, const TpContext& tp, bool gradients, const SerialState* values) {
  const auto dims = tp_shard_dims(model);
  const auto vocab = vocab_weights(model);
  SerialState out;
  torch::NoGradGuard no_grad;
  for (const auto& item : model.named_parameters()) {
    auto d = dims.find(item.key());
    const torch::Tensor mine = gradients ? item.value().grad() : values ? values->at(item.key()) : item.value().detach();
    if (!mine.defined()) throw core::UserError("weights: tensor '" + item.key() + "' has no gradient");
    torch::Tensor t = d == dims.end() || tp.size() == 1 ? mine.clone() : tp.comm->all_gather(*tp.group, mine, d->second);
    if (auto v = vocab.find(item.key()); v != vocab.end()) t = t.narrow(0, 0, v->second->vocab());  // no padding
    out[item.key()] = t;
  }
  return out;
}

}  // namespace quintnet::exec
