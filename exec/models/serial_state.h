#pragma once
// A model's serial (unsharded) parameters, and the moves between them and one tensor-
// parallel rank's shards.  Every model (ViT, GPT-2) is built from these layers, so one
// serial state loads into any tp degree and any shards gather back into it.
#include <torch/torch.h>

#include <map>
#include <string>
#include <vector>

#include "exec/tp/tp_ops.h"

namespace quintnet::exec {

class VocabParallelEmbeddingImpl;

// Serial parameters by name, e.g. "block3.mlp.fc1.weight" -> [4D, D].
using SerialState = std::map<std::string, torch::Tensor>;

// Parameter name -> the dimension tensor parallelism splits it along, for every
// parameter of a column-, row-, qkv- or vocab-parallel layer (replicated ones absent).
std::map<std::string, int> tp_shard_dims(torch::nn::Module& model);
// Parameter name -> the real number of rows of each vocabulary-parallel weight (its tp
// shards together hold that many padded to a multiple of tp).
std::map<std::string, std::int64_t> vocabulary_rows(torch::nn::Module& model);
// The parameters tp_shard_dims leaves out: every tp rank holds them whole.
std::vector<torch::Tensor> replicated_parameters(torch::nn::Module& model);

// Cuts serial parameters of `model` into one tp rank's shards: a split parameter's chunk
// along its tp dimension, a vocabulary-parallel weight's rows (its padding rows zero,
// whatever tp degree padded the serial tensor: a checkpoint's merged shards carry the
// padding of the tp it was written on), a replicated one whole.
class TpSlicer {
 public:
  explicit TpSlicer(torch::nn::Module& model);
  // This rank's part of parameter `name`'s serial tensor `full`, shaped `shard` (the rank's
  // parameter).  Throws core::UserError, `what` naming the tensor, when `full` does not fit.
  torch::Tensor slice(const std::string& name, const torch::Tensor& full, c10::IntArrayRef shard, const TpContext& tp,
                      const std::string& what) const;

 private:
  std::map<std::string, int> dims_;
  std::map<std::string, const VocabParallelEmbeddingImpl*> vocab_;
};

// Copies this rank's shard of every parameter of `model` out of a serial state (TpSlicer).
// Throws core::UserError naming a missing tensor or a wrong shape.
void load_serial_state(torch::nn::Module& model, const SerialState& state, const TpContext& tp);
// The serial parameters of `model` (or, with `gradients`, their gradients), gathering
// shards over the tp group.  `values`: this rank's tensors to read instead of the
// model's own, by parameter name — the fp32 master weights under bf16 weights
// (FlatAdamW::whole_masters()), so a saved run keeps its full precision.
SerialState gather_serial_state(torch::nn::Module& model, const TpContext& tp, bool gradients = false,
                                const SerialState* values = nullptr);

}  // namespace quintnet::exec
