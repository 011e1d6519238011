#pragma once
// Context parallelism (plan: a `cp` axis in mesh_name) — each sample's sequence split
// over the cp group.  The sequence is cut into 2·cp equal chunks and cp rank i holds
// chunk i and chunk 2·cp − 1 − i (Megatron-LM's and Llama 3's load balancing): under a
// causal mask a late chunk attends to many keys, an early one to few, so pairing them
// gives every rank the same attention work.
//
//   cp = 2, chunks 0 1 2 3:   rank 0 holds 0 and 3, rank 1 holds 1 and 2.
//
// Everything but attention is per token, so a rank runs the model on its two chunks as
// if they were a sequence of their own; attention sees the whole sequence through the
// ring (exec/cp/ring_attention.h), and rotary positions are the chunks' own.
#include <torch/torch.h>

#include "exec/comm/communicator.h"

namespace quintnet::exec {

struct CpContext {
  Communicator* comm = nullptr;
  Group* group = nullptr;

  int size() const { return group ? group->size() : 1; }
  int rank() const { return group ? group->rank : 0; }
  // Which of the 2·size() chunks this rank's half `half` (0 or 1) is, on cp rank `of`.
  int chunk_of(int of, int half) const { return half == 0 ? of : 2 * size() - 1 - of; }
};

// This rank's part of a whole sequence: its two chunks of `full` along `dim`, in order.
torch::Tensor local_sequence(const torch::Tensor& full, const CpContext& cp, int64_t dim = 1);
// The positions in the whole sequence of this rank's `local_length` tokens.
torch::Tensor local_positions(int64_t local_length, const CpContext& cp, const torch::Device& device);

}  // namespace quintnet::exec
