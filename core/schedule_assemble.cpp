// Turns per-rank compute orders into complete core::Schedule action lists.
#include "core/schedule_generators.h"

namespace quintnet::core {

Schedule assemble_schedule(ScheduleKind kind, int pp, int microbatches, int chunks,
                           const std::vector<std::vector<ComputeOp>>& compute) {
  Schedule s;
  s.name = schedule_kind_name(kind);
  s.pp = pp;
  s.microbatches = microbatches;
  s.chunks = chunks;
  s.ranks.resize(pp);
  const int last_stage = s.num_stages() - 1;

  for (int r = 0; r < pp; ++r) {
    auto& out = s.ranks[r];
    const auto& ops = compute[r];
    // The action that completes a chunk's gradients is its last B or BW; GRAD_SYNC
    // follows it so the DP all-reduce of that chunk can overlap later compute.
    std::vector<int> last_grad_op(chunks, -1);
    for (int i = 0; i < static_cast<int>(ops.size()); ++i)
      if (ops[i].kind == ActionKind::Backward || ops[i].kind == ActionKind::BackwardWeight)
        last_grad_op[ops[i].chunk] = i;

    for (int i = 0; i < static_cast<int>(ops.size()); ++i) {
      const ComputeOp& op = ops[i];
      const int stage = s.stage(r, op.chunk);
      const int prev_rank = stage > 0 ? s.rank_of_stage(stage - 1) : -1;
      const int next_rank = stage < last_stage ? s.rank_of_stage(stage + 1) : -1;
      // With pp == 1 neighbouring stages share the rank: no message at all.
      const bool prev_remote = stage > 0 && prev_rank != r;
      const bool next_remote = stage < last_stage && next_rank != r;

      switch (op.kind) {
        case ActionKind::Forward:
          if (prev_remote) out.push_back({ActionKind::RecvAct, op.mb, op.chunk, prev_rank});
          out.push_back({ActionKind::Forward, op.mb, op.chunk, -1});
          if (next_remote) out.push_back({ActionKind::SendAct, op.mb, op.chunk, next_rank});
          break;
        case ActionKind::Backward:
        case ActionKind::BackwardInput:
          if (next_remote) out.push_back({ActionKind::RecvGrad, op.mb, op.chunk, next_rank});
          out.push_back({op.kind, op.mb, op.chunk, -1});
          if (prev_remote) out.push_back({ActionKind::SendGrad, op.mb, op.chunk, prev_rank});
          break;
        default:
          out.push_back({op.kind, op.mb, op.chunk, -1});
          break;
      }
      for (int c = 0; c < chunks; ++c)
        if (last_grad_op[c] == i) out.push_back({ActionKind::GradSync, -1, c, -1});
    }
    out.push_back({ActionKind::OptimizerStep, -1, 0, -1});
  }
  return s;
}

Schedule make_forward_only(int pp, int microbatches, int chunks) {
  std::vector<std::vector<ComputeOp>> compute(pp);
  for (int r = 0; r < pp; ++r)
    for (int mb = 0; mb < microbatches; ++mb)
      for (int c = 0; c < chunks; ++c) compute[r].push_back({ActionKind::Forward, mb, c});
  Schedule s = assemble_schedule(ScheduleKind::Afab, pp, microbatches, chunks, compute);
  s.name = "forward-only";
  for (auto& actions : s.ranks) actions.pop_back();  // the OPTIMIZER_STEP: nothing to update
  return s;
}

}  // namespace quintnet::core
