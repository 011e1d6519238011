#pragma once
// Learning rate at an optimizer step: linear warm-up to the peak, then cosine decay
// to min_ratio × peak at the last step.
#include <algorithm>
#include <cmath>

namespace quintnet::exec {

inline double learning_rate_at(long step, long total_steps, long warmup_steps, double peak, double min_ratio = 0.1) {
  if (warmup_steps > 0 && step < warmup_steps) return peak * static_cast<double>(step + 1) / warmup_steps;
  const long decay = std::max(1L, total_steps - warmup_steps);
  const double progress = std::min(1.0, static_cast<double>(step - warmup_steps) / decay);
  const double cosine = 0.5 * (1.0 + std::cos(M_PI * progress));
  return peak * (min_ratio + (1.0 - min_ratio) * cosine);
}

}  // namespace quintnet::exec
