#pragma once
// TiedGradients — a parameter two pipeline stages each hold a copy of (GPT-2's token
// embedding, used again as the output head) must take the same step, with the gradient
// of both uses.  After the backward the two copies' gradients are summed: between the
// pipeline's first and last ranks, which hold them (Megatron-LM's embedding group; the
// middle stages take no part), or on one rank where it holds both (one pp rank running
// several stages: virtual_stages with pp 1).  The tensor is a tp shard only.
#include "exec/comm/communicator.h"
#include "exec/parallel/parallel_model.h"

namespace quintnet::exec {

class TiedGradients {
 public:
  explicit TiedGradients(Communicator& comm) : comm_(comm) {}

  // After a step's backward: the copies' gradients summed (nothing when the model ties
  // nothing, or one stage holds the whole model).
  void sum_copies(ParallelModel& model);

 private:
  Communicator& comm_;
};

}  // namespace quintnet::exec
