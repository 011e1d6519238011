// The fused CPU attention kernel against the composition it replaces (matmul,
// softmax, matmul): outputs and all three input gradients, bidirectional and causal,
// on the ViT's shape, on odd sizes, and on q/k/v that are views into one projection.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include "exec/kernels/attention_cpu.h"
#include "exec/models/attention.h"
#include "exec/models/recompute.h"

using namespace quintnet::exec;

namespace {

struct Case {
  int64_t b, t, h, d;
  bool causal;
};

void expect_close(const torch::Tensor& a, const torch::Tensor& b, const std::string& what) {
  const double err = (a - b).abs().max().item<double>(), scale = b.abs().max().item<double>();
  EXPECT_LT(err, 2e-6 * std::max(1.0, scale)) << what << ": max difference " << err << " (largest value " << scale << ")";
}

void check(const Case& c, int threads) {
  torch::set_num_threads(threads);
  torch::manual_seed(11);
  // One fused projection output [B, T, 3·H·d], split into q, k, v views as the models do.
  const torch::Tensor qkv = torch::randn({c.b, c.t, 3 * c.h * c.d}) * 2.0;
  const torch::Tensor upstream = torch::randn({c.b, c.t, c.h, c.d});
  std::vector<torch::Tensor> outs, grads;
  for (bool fused : {true, false}) {
    torch::Tensor leaf = qkv.clone().requires_grad_(true);
    auto parts = leaf.chunk(3, -1);
    auto heads = [&](const torch::Tensor& y) { return y.view({c.b, c.t, c.h, c.d}); };
    torch::Tensor out = fused ? attention_core(heads(parts[0]), heads(parts[1]), heads(parts[2]), c.causal)
                              : attention_reference(heads(parts[0]), heads(parts[1]), heads(parts[2]), c.causal);
    (out * upstream).sum().backward();
    outs.push_back(out.detach());
    grads.push_back(leaf.grad());
  }
  const std::string what = "b" + std::to_string(c.b) + " t" + std::to_string(c.t) + " h" + std::to_string(c.h) + " d" +
                           std::to_string(c.d) + (c.causal ? " causal" : "") + " threads " + std::to_string(threads);
  EXPECT_FALSE(torch::equal(outs[0], outs[1])) << what << ": the fused kernel did not run (bitwise the reference)";
  expect_close(outs[0], outs[1], what + " output");
  const auto g = grads[0].chunk(3, -1), r = grads[1].chunk(3, -1);
  expect_close(g[0], r[0], what + " dq");
  expect_close(g[1], r[1], what + " dk");
  expect_close(g[2], r[2], what + " dv");
}

}  // namespace

// Every CPU level this machine can run (each has tiles of its own width), not only the
// one it picks: an AVX-512 machine checks all three.
TEST(AttentionCore, FusedKernelMatchesMatmulSoftmaxMatmulWithGradients) {
  using kernels::CpuLevel;
  const CpuLevel best = kernels::best_cpu_level();
  for (CpuLevel level : {CpuLevel::kBaseline, CpuLevel::kAvx2, CpuLevel::kAvx512}) {
    if (level > best) continue;
    SCOPED_TRACE(std::string("CPU level ") + kernels::cpu_level_name(level));
    kernels::set_cpu_level(level);
    ASSERT_EQ(kernels::cpu_level(), level);
    for (int threads : {1, 2})
      for (const Case& c : {Case{3, 50, 4, 16, false}, Case{2, 64, 2, 16, true}, Case{2, 7, 3, 5, false},
                            Case{1, 9, 1, 3, true}, Case{2, 33, 2, 64, true}})
        check(c, threads);
  }
  kernels::set_cpu_level(best);
}

TEST(AttentionCore, ALevelTheCpuLacksIsRefused) {
  using kernels::CpuLevel;
  if (kernels::best_cpu_level() == CpuLevel::kAvx512) GTEST_SKIP() << "this CPU runs every level";
  const CpuLevel before = kernels::cpu_level();
  EXPECT_THROW(kernels::set_cpu_level(CpuLevel::kAvx512), std::invalid_argument);
  EXPECT_EQ(kernels::cpu_level(), before);
}

TEST(AttentionCore, ExtremeScoresStayFinite) {
  // Scores ~±400: the row maximum is subtracted before the exponential, as softmax does.
  torch::manual_seed(5);
  const torch::Tensor q = torch::randn({1, 8, 2, 16}) * 20, k = torch::randn({1, 8, 2, 16}) * 20,
                      v = torch::randn({1, 8, 2, 16});
  const torch::Tensor fused = attention_core(q, k, v, false), reference = attention_reference(q, k, v, false);
  EXPECT_TRUE(torch::isfinite(fused).all().item<bool>());
  expect_close(fused, reference, "large scores");
}

TEST(AttentionCore, Bfloat16InputsRunTheKernelInFp32) {
  torch::manual_seed(7);
  const torch::Tensor q = torch::randn({2, 9, 2, 16}), k = torch::randn({2, 9, 2, 16}), v = torch::randn({2, 9, 2, 16});
  auto bf = [](const torch::Tensor& t) { return t.to(torch::kBFloat16); };
  // The fp32 kernel on the bf16-rounded inputs (upcast, nothing computed in bf16), its
  // output rounded to bf16 for the next projection.
  const torch::Tensor out = attention_core(bf(q), bf(k), bf(v), true);
  EXPECT_EQ(out.scalar_type(), torch::kBFloat16);
  EXPECT_TRUE(torch::equal(out, bf(attention_core(bf(q).to(torch::kFloat32), bf(k).to(torch::kFloat32),
                                                  bf(v).to(torch::kFloat32), true))));
}

TEST(AttentionCore, OtherDtypesAndDropoutTakeTheReferencePath) {
  torch::manual_seed(5);
  const torch::Tensor q = torch::randn({2, 6, 2, 8}, torch::kFloat64), k = torch::randn({2, 6, 2, 8}, torch::kFloat64),
                      v = torch::randn({2, 6, 2, 8}, torch::kFloat64);
  EXPECT_TRUE(torch::equal(attention_core(q, k, v, true), attention_reference(q, k, v, true)));
  torch::manual_seed(1);
  const torch::Tensor a = attention_core(q.to(torch::kFloat32), k.to(torch::kFloat32), v.to(torch::kFloat32), false, 0.5, true);
  torch::manual_seed(1);
  const torch::Tensor b = attention_reference(q.to(torch::kFloat32), k.to(torch::kFloat32), v.to(torch::kFloat32), false, 0.5, true);
  EXPECT_TRUE(torch::equal(a, b));
}

TEST(AttentionCore, SdpaMatchesMatmulSoftmaxMatmulOnLibTorch2) {
  if (!sdpa_available()) GTEST_SKIP() << "LibTorch 1.x has no scaled_dot_product_attention";
  for (const Case& c : {Case{3, 50, 4, 16, false}, Case{2, 64, 2, 16, true}, Case{2, 7, 3, 5, false}}) {
    torch::manual_seed(12);
    const torch::Tensor q0 = torch::randn({c.b, c.t, c.h, c.d}), k0 = torch::randn({c.b, c.t, c.h, c.d}),
                        v0 = torch::randn({c.b, c.t, c.h, c.d}), upstream = torch::randn({c.b, c.t, c.h, c.d});
    std::vector<std::vector<torch::Tensor>> results;
    for (bool sdpa : {true, false}) {
      torch::Tensor q = q0.clone().requires_grad_(true), k = k0.clone().requires_grad_(true),
                    v = v0.clone().requires_grad_(true);
      torch::Tensor out = sdpa ? attention_sdpa(q, k, v, c.causal) : attention_reference(q, k, v, c.causal);
      (out * upstream).sum().backward();
      results.push_back({out.detach(), q.grad(), k.grad(), v.grad()});
    }
    const char* names[] = {"output", "dq", "dk", "dv"};
    for (int i = 0; i < 4; ++i)
      expect_close(results[0][i], results[1][i], std::string("sdpa t") + std::to_string(c.t) + " " + names[i]);
  }
}

// SDPA with attention dropout (the GPU path: attention_core hands CUDA tensors to SDPA
// with the plan's dropout): its masks are its own, so the check is what dropout means —
// one draw differs from the output without dropout, the mean of many draws equals it.
TEST(AttentionCore, SdpaDropoutIsAnUnbiasedDropoutOfTheWeights) {
  if (!sdpa_available()) GTEST_SKIP() << "LibTorch 1.x has no scaled_dot_product_attention";
  torch::manual_seed(13);
  const torch::Tensor q = torch::randn({1, 8, 2, 8}), k = torch::randn({1, 8, 2, 8}), v = torch::randn({1, 8, 2, 8});
  const torch::Tensor exact = attention_reference(q, k, v, true);
  torch::Tensor sum = torch::zeros_like(exact);
  const int draws = 4000;
  for (int i = 0; i < draws; ++i) {
    const torch::Tensor one = attention_sdpa(q, k, v, true, 0.5);
    if (i == 0) {
      EXPECT_GT((one - exact).abs().max().item<double>(), 0.1) << "dropout 0.5 left the output as it was";
    }
    sum += one;
  }
  // Each draw's elements vary by about 1 around the mean; 4000 draws: a standard error ~0.016.
  const double err = (sum / draws - exact).abs().max().item<double>();
  EXPECT_LT(err, 0.08) << "the mean of " << draws << " dropout draws is off the exact output by " << err;
}

// Selective recomputation (a RecomputeScope): the backward computes the softmax
// (and the dropout mask) again instead of keeping it, and gives the same output and
// input gradients bit for bit — on the fused kernel, and on the composition with dropout,
// where it must draw the forward's mask again and leave the generator as it found it.
TEST(AttentionCore, SelectiveRecomputationGivesTheSameGradients) {
  for (double dropout : {0.0, 0.3}) {
    torch::manual_seed(21);
    const torch::Tensor q0 = torch::randn({2, 9, 2, 16}), k0 = torch::randn({2, 9, 2, 16}),
                        v0 = torch::randn({2, 9, 2, 16}), upstream = torch::randn({2, 9, 2, 16});
    std::vector<std::vector<torch::Tensor>> results;
    for (bool recompute : {false, true}) {
      torch::Tensor q = q0.clone().requires_grad_(true), k = k0.clone().requires_grad_(true),
                    v = v0.clone().requires_grad_(true);
      torch::manual_seed(3);
      const long before = attention_cores_recomputed();
      torch::Tensor out;
      {
        RecomputeScope selective(recompute ? Recompute::Selective : Recompute::None);
        out = attention_core(q, k, v, /*causal=*/true, dropout, /*training=*/true);
      }
      (out * upstream).sum().backward();
      EXPECT_EQ(attention_cores_recomputed() - before, recompute ? 1 : 0) << "dropout " << dropout;
      // The next draw after the backward: as without recomputation.
      results.push_back({out, q.grad(), k.grad(), v.grad(), torch::rand({4})});
    }
    for (size_t i = 0; i < results[0].size(); ++i)
      EXPECT_TRUE(torch::equal(results[0][i], results[1][i])) << "dropout " << dropout << ", result " << i;
  }
}
