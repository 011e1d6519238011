// The compute orders of AFAB, 1F1B, interleaved 1F1B and ZB-H1.
#include <algorithm>
#include <deque>
#include <string>

#include "core/error.h"
#include "core/schedule_generators.h"

namespace quintnet::core {
namespace {

using Order = std::vector<ComputeOp>;

void check_args(int pp, int microbatches, int chunks) {
  if (pp < 1) throw ConfigError("pp: " + std::to_string(pp) + " pipeline ranks; use at least 1");
  if (microbatches < 1)
    throw ConfigError("microbatches: " + std::to_string(microbatches) + "; use at least 1");
  if (chunks < 1) throw ConfigError("chunks: " + std::to_string(chunks) + "; use at least 1");
  if (pp > 4096 || microbatches > 65536 || chunks > 64)
    throw ConfigError("schedule too large (pp " + std::to_string(pp) + ", microbatches " +
                      std::to_string(microbatches) + ", chunks " + std::to_string(chunks) +
                      "); limits are pp <= 4096, microbatches <= 65536, chunks <= 64");
}

}  // namespace

Schedule make_afab(int pp, int microbatches) {
  check_args(pp, microbatches, 1);
  std::vector<Order> compute(pp);
  for (int r = 0; r < pp; ++r) {
    for (int mb = 0; mb < microbatches; ++mb) compute[r].push_back({ActionKind::Forward, mb});
    for (int mb = 0; mb < microbatches; ++mb) compute[r].push_back({ActionKind::Backward, mb});
  }
  return assemble_schedule(ScheduleKind::Afab, pp, microbatches, 1, compute);
}

Schedule make_1f1b(int pp, int microbatches) {
  check_args(pp, microbatches, 1);
  std::vector<Order> compute(pp);
  for (int r = 0; r < pp; ++r) {
    // Stage r keeps at most p - r microbatches in flight: p-r-1 warm-up forwards,
    // then each forward is followed by the backward of the oldest microbatch.
    const int warmup = std::min(pp - r - 1, microbatches);
    Order& order = compute[r];
    for (int mb = 0; mb < warmup; ++mb) order.push_back({ActionKind::Forward, mb});
    for (int i = 0; i < microbatches - warmup; ++i) {
      order.push_back({ActionKind::Forward, warmup + i});
      order.push_back({ActionKind::Backward, i});
    }
    for (int mb = microbatches - warmup; mb < microbatches; ++mb)
      order.push_back({ActionKind::Backward, mb});
  }
  return assemble_schedule(ScheduleKind::OneFOneB, pp, microbatches, 1, compute);
}

Schedule make_interleaved(int pp, int microbatches, int chunks) {
  check_args(pp, microbatches, chunks);
  // Megatron's order: microbatches in groups of pp; each group runs through chunk 0,
  // then chunk 1, ... forward, and through the chunks in reverse backward.  When m is
  // not a multiple of pp the first group takes the remainder (a short *last* group
  // would need its next chunk before the pipeline can deliver it, and deadlocks).
  std::vector<int> group_sizes(1, std::min(microbatches, pp + microbatches % pp));
  for (int left = microbatches - group_sizes[0]; left > 0; left -= pp) group_sizes.push_back(pp);
  Order forward, backward;
  for (int g = 0, start = 0; g < static_cast<int>(group_sizes.size()); start += group_sizes[g++])
    for (int c = 0; c < chunks; ++c)
      for (int i = 0; i < group_sizes[g]; ++i) {
        forward.push_back({ActionKind::Forward, start + i, c});
        backward.push_back({ActionKind::Backward, start + i, chunks - 1 - c});
      }
  const int total = microbatches * chunks;
  std::vector<Order> compute(pp);
  for (int r = 0; r < pp; ++r) {
    // Warm-up: enough forwards that the first backward of the last chunk can meet
    // the gradient coming back ((pp - r - 1) * 2 for the round trip, plus one
    // (first) group per extra chunk).
    const int warmup = std::min(total, (pp - r - 1) * 2 + (chunks - 1) * group_sizes[0]);
    Order& order = compute[r];
    for (int k = 0; k < warmup; ++k) order.push_back(forward[k]);
    for (int k = 0; k < total - warmup; ++k) {
      order.push_back(forward[warmup + k]);
      order.push_back(backward[k]);
    }
    for (int k = total - warmup; k < total; ++k) order.push_back(backward[k]);
  }
  return assemble_schedule(ScheduleKind::Interleaved, pp, microbatches, chunks, compute);
}

Schedule make_zb_h1(int pp, int microbatches) {
  check_args(pp, microbatches, 1);
  std::vector<Order> compute(pp);
  for (int r = 0; r < pp; ++r) {
    // Same forward / input-gradient order as 1F1B, so the input-gradient chain runs
    // back through the pipeline as fast as it can.  Stage r holds back up to r
    // weight-gradient passes (the last stage the most): they fill the cool-down,
    // where 1F1B waits.  With tf = tb = tw and m >= p the bubble is
    // (p-1)(tf+tb-tw) per rank, the paper's figure for ZB-H1.
    const int warmup = std::min(pp - r - 1, microbatches);
    const int max_deferred = r;
    Order& order = compute[r];
    std::deque<int> pending_w;
    auto input_grad = [&](int mb) {
      order.push_back({ActionKind::BackwardInput, mb});
      pending_w.push_back(mb);
      if (static_cast<int>(pending_w.size()) > max_deferred) {
        order.push_back({ActionKind::BackwardWeight, pending_w.front()});
        pending_w.pop_front();
      }
    };
    for (int mb = 0; mb < warmup; ++mb) order.push_back({ActionKind::Forward, mb});
    for (int i = 0; i < microbatches - warmup; ++i) {
      order.push_back({ActionKind::Forward, warmup + i});
      input_grad(i);
    }
    for (int mb = microbatches - warmup; mb < microbatches; ++mb) input_grad(mb);
    for (int mb : pending_w) order.push_back({ActionKind::BackwardWeight, mb});
  }
  return assemble_schedule(ScheduleKind::ZbH1, pp, microbatches, 1, compute);
}

Schedule make_schedule(ScheduleKind kind, int pp, int microbatches, int chunks) {
  if (kind != ScheduleKind::Interleaved && chunks != 1)
    throw ConfigError(std::string("chunks: ") + std::to_string(chunks) + " virtual stages per rank need the interleaved schedule; " +
                      schedule_kind_name(kind) + " uses 1");
  switch (kind) {
    case ScheduleKind::Afab: return make_afab(pp, microbatches);
    case ScheduleKind::OneFOneB: return make_1f1b(pp, microbatches);
    case ScheduleKind::Interleaved: return make_interleaved(pp, microbatches, chunks);
    case ScheduleKind::ZbH1: return make_zb_h1(pp, microbatches);
  }
  throw ConfigError("unknown schedule kind");
}

}  // namespace quintnet::core
