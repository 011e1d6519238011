#include "core/stage_balance.h"

#include <algorithm>
#include <cstdio>
#include <limits>

#include "core/error.h"

namespace quintnet::core {
namespace {

// Forward FLOPs of layers [first, end) for one sample (the backward is 2x: same ratio).
double cost(const ModelDims& m, int first, int end) { return stage_cost(m, first, end, 1, 1).forward_flops; }

}  // namespace

std::vector<LayerRange> balanced_stages(const ModelDims& m, int stages) {
  const int L = m.layers;
  if (stages < 1 || L < stages)
    throw ConfigError(std::to_string(L) + " layers cannot fill " + std::to_string(stages) +
                      " pipeline stages; reduce pp or virtual_stages");
  // best[s][l]: the smallest possible slowest-stage cost of cutting layers [0, l) into s stages.
  const double inf = std::numeric_limits<double>::infinity();
  std::vector<std::vector<double>> best(stages + 1, std::vector<double>(L + 1, inf));
  std::vector<std::vector<int>> cut(stages + 1, std::vector<int>(L + 1, 0));
  best[0][0] = 0;
  for (int s = 1; s <= stages; ++s)
    for (int l = s; l <= L - (stages - s); ++l)
      // The last stage so far is [k, l); ties go to the larger earlier stages (the even
      // split's convention), i.e. the largest k.
      for (int k = s - 1; k < l; ++k) {
        const double c = std::max(best[s - 1][k], cost(m, k, l));
        if (c <= best[s][l] * (1 + 1e-12)) best[s][l] = c, cut[s][l] = k;
      }
  std::vector<LayerRange> out(stages);
  for (int s = stages, l = L; s >= 1; --s) {
    out[s - 1] = {cut[s][l], l};
    l = cut[s][l];
  }
  return out;
}

std::string stage_balance_note(const ModelDims& m, const std::vector<LayerRange>& ranges) {
  std::string out = "layers per stage:";
  double total = 0, worst = 0;
  for (const auto& r : ranges) {
    out += " " + std::to_string(r.end - r.first);
    const double c = cost(m, r.first, r.end);
    total += c;
    worst = std::max(worst, c);
  }
  char tail[64];
  std::snprintf(tail, sizeof(tail), " (slowest stage / mean = %.3f)", worst / (total / ranges.size()));
  return out + tail;
}

}  // namespace quintnet::core
