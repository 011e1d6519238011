#pragma once
// TiedGradients — a parameter two pipeline stages each hold a copy of (GPT-2's token
// embedding, used again as the output head) must take the same step, with the gradient
// of both uses.  After the backward, every pp rank joins one all-reduce over the pp
// group, contributing the sum of the copies it holds (zeros if none): then each copy's
// gradient is the sum.  Simple, and the tensor is a tp shard only.
#include <cstdint>

#include "exec/comm/communicator.h"
#include "exec/parallel/parallel_model.h"

namespace quintnet::exec {

class TiedGradients {
 public:
  TiedGradients(Communicator& comm, Group& pp) : comm_(comm), pp_(pp) {}

  // After a step's backward: the copies' gradients summed (nothing when the model ties
  // nothing, or one stage holds the whole model).
  void sum_over_pipeline(ParallelModel& model);

 private:
  Communicator& comm_;
  Group& pp_;
  bool checked_ = false;  // whether the model ties anything: learnt on the first step
  int64_t numel_ = 0;     // elements of the tied parameter (0: none)
};

}  // namespace quintnet::exec
