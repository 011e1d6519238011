// Stage balancing by the cost model against brute force over every contiguous split,
// and the even split for uniform layers with a cheap embedding and head.
#include <gtest/gtest.h>

#include <functional>

#include "core/error.h"
#include "core/stage_balance.h"

using namespace quintnet::core;

namespace {

// The smallest slowest-stage cost over all splits of `layers` into `stages`, by enumeration.
double brute_force_best(const ModelDims& m, int stages) {
  double best = 1e300;
  std::vector<int> cuts;
  std::function<void(int, int)> go = [&](int start, int left) {
    if (left == 1) {
      double worst = stage_cost(m, start, m.layers, 1, 1).forward_flops;
      int prev = 0;
      for (int c : cuts) worst = std::max(worst, stage_cost(m, prev, c, 1, 1).forward_flops), prev = c;
      best = std::min(best, worst);
      return;
    }
    for (int end = start + 1; end <= m.layers - (left - 1); ++end) {
      cuts.push_back(end);
      go(end, left - 1);
      cuts.pop_back();
    }
  };
  go(0, stages);
  return best;
}

double slowest(const ModelDims& m, const std::vector<LayerRange>& r) {
  double worst = 0;
  for (const auto& s : r) worst = std::max(worst, stage_cost(m, s.first, s.end, 1, 1).forward_flops);
  return worst;
}

}  // namespace

TEST(StageBalance, UniformLayersGiveTheEvenSplit) {
  const ModelDims vit = model_dims(ModelConfig{}, 0);  // the original config's ViT, depth 8
  for (auto [stages, sizes] : std::vector<std::pair<int, std::vector<int>>>{
           {1, {8}}, {2, {4, 4}}, {4, {2, 2, 2, 2}}, {8, {1, 1, 1, 1, 1, 1, 1, 1}}}) {
    const auto r = balanced_stages(vit, stages);
    ASSERT_EQ(static_cast<int>(r.size()), stages);
    for (int s = 0; s < stages; ++s) EXPECT_EQ(r[s].end - r[s].first, sizes[s]) << stages << " stages";
  }
}

TEST(StageBalance, MatchesBruteForceAndUnloadsTheLmHeadStage) {
  for (const char* name : {"gpt2-124m", "gpt2-355m", "gpt3-1.3b"})
    for (int stages : {2, 3, 4, 6}) {
      const ModelDims m = model_dims(name);
      const auto r = balanced_stages(m, stages);
      ASSERT_EQ(static_cast<int>(r.size()), stages);
      EXPECT_EQ(r.front().first, 0);
      EXPECT_EQ(r.back().end, m.layers);
      for (size_t s = 1; s < r.size(); ++s) EXPECT_EQ(r[s].first, r[s - 1].end);
      EXPECT_NEAR(slowest(m, r), brute_force_best(m, stages), 1e-9 * slowest(m, r)) << name << " " << stages;
    }
  // GPT-2 124M: the LM head (2 h V per token) is worth several layers, so the last
  // of 4 stages gets fewer layers than the first.
  const auto r = balanced_stages(model_dims("gpt2-124m"), 4);
  EXPECT_LT(r.back().end - r.back().first, r.front().end - r.front().first);
  EXPECT_THROW(balanced_stages(model_dims("gpt2-124m"), 13), ConfigError);
}
