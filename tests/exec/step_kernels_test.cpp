// The pieces of the GPU's fast step, checked on the CPU against the plain computations
// they replace: the gradient norm by ranges (no fp64 copy of the buffer) against an
// fp64 reference, AdamW's fused kernel against the flat one and against
// torch::optim::AdamW, a skipped step that leaves everything as it was, bf16 weights with
// fp32 masters against the fp32 step, figures read back a step late, and the blocked
// cross-entropy against LibTorch's.
#include <gtest/gtest.h>
#include <torch/torch.h>
#include <torch/version.h>

#include <cmath>
#include <limits>

#include "exec/models/chunked_cross_entropy.h"
#include "exec/dp/flat_parameters.h"
#include "exec/parallel/flat_adamw.h"
#include "exec/parallel/grad_norm.h"
#include "exec/train/pending_figures.h"

using namespace quintnet::exec;

namespace {

// A small model in flat buffers, with gradients drawn as a backward would leave them.
struct Model : torch::nn::Module {
  Model() {
    a = register_parameter("a", torch::randn({300, 70}));
    b = register_parameter("b", torch::randn({70}));
    c = register_parameter("c", torch::randn({70, 11}));
  }
  torch::Tensor a, b, c;
};

void draw_gradients(FlatParameters& flat, int seed) {
  torch::manual_seed(seed);
  flat.grads().copy_(torch::randn({flat.grads().numel()}) * 0.1);
}

}  // namespace

TEST(GradNorm, SumOfSquaresByRangesEqualsTheFp64Reference) {
  torch::manual_seed(5);
  const torch::Tensor flat = torch::randn({3'000'000}) * 1e-3;
  const std::vector<FlatRange> ranges = {{0, 1000}, {5000, 1'200'000}, {2'000'000, 999'999}};
  double reference = 0;
  for (const FlatRange& r : ranges) reference += flat.narrow(0, r.offset, r.numel).to(torch::kFloat64).square().sum().item<double>();
  const torch::Tensor sum = sum_of_squares(flat, ranges);
  EXPECT_EQ(sum.scalar_type(), torch::kFloat64);
  EXPECT_NEAR(sum.item<double>(), reference, 1e-6 * reference);
  EXPECT_EQ(sum_of_squares(flat, {}).item<double>(), 0.0);
  // A NaN anywhere in the ranges makes the sum NaN (the trainer's non-finite check).
  torch::Tensor poisoned = flat.clone();
  poisoned[6000] = std::numeric_limits<float>::quiet_NaN();
  EXPECT_TRUE(std::isnan(sum_of_squares(poisoned, ranges).item<double>()));
}

TEST(GradNorm, IntersectKeepsTheElementsInBothLists) {
  const std::vector<FlatRange> a = {{0, 10}, {20, 10}, {40, 5}}, b = {{5, 20}, {28, 20}};
  const std::vector<FlatRange> got = intersect(a, b);
  ASSERT_EQ(got.size(), 4u);
  const std::vector<std::pair<int64_t, int64_t>> expected = {{5, 5}, {20, 5}, {28, 2}, {40, 5}};
  for (size_t i = 0; i < got.size(); ++i) {
    EXPECT_EQ(got[i].offset, expected[i].first) << i;
    EXPECT_EQ(got[i].numel, expected[i].second) << i;
  }
  EXPECT_TRUE(intersect(a, {}).empty());
}

TEST(FlatParameters, ShardedAndReplicatedRangesMergeNeighbours) {
  Model m;
  FlatParameters flat(m, {{"a", 0}, {"c", 1}});
  // Buffer order is reverse registration: c, b, a — c and a are not neighbours.
  ASSERT_EQ(flat.sharded_ranges().size(), 2u);
  EXPECT_EQ(flat.sharded_ranges()[0].offset, 0);
  EXPECT_EQ(flat.sharded_ranges()[0].numel, 70 * 11);
  EXPECT_EQ(flat.sharded_ranges()[1].offset, 70 * 11 + 70);
  ASSERT_EQ(flat.replicated_ranges().size(), 1u);  // b, between them
  EXPECT_EQ(flat.replicated_ranges()[0].offset, 70 * 11);
  EXPECT_EQ(flat.replicated_ranges()[0].numel, 70);
  Model n;
  FlatParameters both(n, {{"b", 0}, {"c", 1}});
  ASSERT_EQ(both.sharded_ranges().size(), 1u);
  EXPECT_EQ(both.sharded_ranges()[0].numel, 70 * 11 + 70);
}

TEST(FlatAdamW, FlatKernelTakesTorchsAdamWStep) {
  torch::manual_seed(1);
  Model ours, theirs;
  {
    torch::NoGradGuard no_grad;
    for (size_t i = 0; i < ours.parameters().size(); ++i) theirs.parameters()[i].copy_(ours.parameters()[i]);
  }
  FlatParameters flat(ours, {});
  FlatAdamW opt(flat, 0.1, nullptr, FlatAdamW::Kernel::Flat);
  torch::optim::AdamW reference(theirs.parameters(), torch::optim::AdamWOptions(1e-2).weight_decay(0.1));
  for (int step = 0; step < 5; ++step) {
    draw_gradients(flat, 10 + step);
    for (size_t i = 0; i < ours.parameters().size(); ++i) theirs.parameters()[i].mutable_grad() = ours.parameters()[i].grad().clone();
    opt.step(1e-2);
    reference.step();
  }
  for (size_t i = 0; i < ours.parameters().size(); ++i)
    EXPECT_TRUE(torch::allclose(ours.parameters()[i], theirs.parameters()[i], 1e-5, 1e-7)) << i;
  EXPECT_EQ(opt.steps(), 5);
}

// A skipped step (a non-finite loss or norm, decided on the device) leaves parameters,
// moments and the step count exactly as they were, whichever kernel.
TEST(FlatAdamW, ASkippedStepChangesNothing) {
  std::vector<FlatAdamW::Kernel> kernels = {FlatAdamW::Kernel::Flat};
  if (FlatAdamW::fused_available()) kernels.push_back(FlatAdamW::Kernel::Fused);
  for (FlatAdamW::Kernel kernel : kernels) {
    torch::manual_seed(2);
    Model m;
    FlatParameters flat(m, {});
    FlatAdamW opt(flat, 0.1, nullptr, kernel);
    draw_gradients(flat, 3);
    opt.step(1e-2, torch::tensor(false));
    const torch::Tensor params = flat.params().clone();
    const std::vector<FlatAdamW::StatePiece> before = opt.state_pieces();
    const torch::Tensor m1 = before[0].exp_avg.clone(), m2 = before[0].exp_avg_sq.clone();
    flat.grads().fill_(std::numeric_limits<float>::quiet_NaN());
    opt.step(1e-2, torch::tensor(true));
    EXPECT_TRUE(torch::equal(flat.params(), params)) << "kernel " << static_cast<int>(kernel);
    EXPECT_TRUE(torch::equal(opt.state_pieces()[0].exp_avg, m1));
    EXPECT_TRUE(torch::equal(opt.state_pieces()[0].exp_avg_sq, m2));
    EXPECT_EQ(opt.steps(), 1);
  }
}

// The GPU's kernel (LibTorch 2.4+: _fused_adamw_, run here on the CPU) against the flat one.
TEST(FlatAdamW, FusedKernelEqualsTheFlatOne) {
  if (!FlatAdamW::fused_available()) GTEST_SKIP() << "LibTorch " << TORCH_VERSION << " has no _fused_adamw_";
  torch::manual_seed(4);
  Model a, b;
  {
    torch::NoGradGuard no_grad;
    for (size_t i = 0; i < a.parameters().size(); ++i) b.parameters()[i].copy_(a.parameters()[i]);
  }
  FlatParameters fa(a, {}), fb(b, {});
  FlatAdamW flat(fa, 0.1, nullptr, FlatAdamW::Kernel::Flat), fused(fb, 0.1, nullptr, FlatAdamW::Kernel::Fused);
  EXPECT_TRUE(fused.fused());
  for (int step = 0; step < 6; ++step) {
    draw_gradients(fa, 20 + step);
    draw_gradients(fb, 20 + step);
    const double lr = 1e-2 * (step + 1);
    flat.step(lr, torch::tensor(false));
    fused.step(lr, torch::tensor(false));
  }
  EXPECT_TRUE(torch::allclose(fa.params(), fb.params(), 1e-5, 1e-7))
      << "max difference " << (fa.params() - fb.params()).abs().max().item<double>();
  EXPECT_EQ(fused.steps(), 6);
  fused.set_steps(2);  // resuming
  EXPECT_EQ(fused.steps(), 2);
}

// bf16 weights (plan `precision: bf16_weights`): the model's parameters are bfloat16
// views of a copy of the fp32 masters, and their gradients fp32 views that autograd adds
// each bf16 gradient into — in fp32, not rounded to bf16 between microbatches.
TEST(FlatParameters, Bf16WeightsCopyTheFp32MastersAndGradientsAddUpInFp32) {
  torch::manual_seed(5);
  Model m;
  const torch::Tensor a0 = m.a.detach().clone();
  FlatParameters flat(m, {}, torch::kBFloat16);
  ASSERT_TRUE(flat.separate_weights());
  EXPECT_EQ(m.a.scalar_type(), torch::kBFloat16);
  EXPECT_EQ(flat.params().scalar_type(), torch::kFloat32);
  EXPECT_EQ(flat.grads().scalar_type(), torch::kFloat32);
  EXPECT_TRUE(torch::equal(flat.slot_views(flat.params()).at("a"), a0)) << "the masters keep the fp32 values";
  EXPECT_TRUE(torch::equal(flat.weights(), flat.params().to(torch::kBFloat16)));

  // Two microbatches' backward passes, and the same gradients taken apart.
  std::vector<torch::Tensor> apart;
  for (int mb = 0; mb < 2; ++mb) {
    const torch::Tensor x = torch::randn({5, 300}).to(torch::kBFloat16);
    torch::matmul(x, m.a).to(torch::kFloat32).square().sum().backward();
    const torch::Tensor w = m.a.detach().clone().requires_grad_(true);
    apart.push_back(torch::autograd::grad({torch::matmul(x, w).to(torch::kFloat32).square().sum()}, {w})[0]);
  }
  ASSERT_EQ(apart[0].scalar_type(), torch::kBFloat16);
  const torch::Tensor in_fp32 = apart[0].to(torch::kFloat32) + apart[1].to(torch::kFloat32);
  EXPECT_TRUE(torch::equal(m.a.grad(), in_fp32)) << "the two gradients added in fp32";
  EXPECT_FALSE(torch::equal(m.a.grad(), (apart[0] + apart[1]).to(torch::kFloat32))) << "added in bf16";
}

// The optimizer under bf16 weights takes the fp32 step on the masters — bit for bit the
// step of an fp32 run on the same values — and the bf16 weights follow it; a skipped
// step leaves both.
TEST(FlatAdamW, UpdatesTheFp32MastersAndTheBf16WeightsFollow) {
  torch::manual_seed(6);
  Model a, b;
  {
    torch::NoGradGuard no_grad;
    for (size_t i = 0; i < a.parameters().size(); ++i) b.parameters()[i].copy_(a.parameters()[i]);
  }
  FlatParameters fp32(a, {}), bf16(b, {}, torch::kBFloat16);
  FlatAdamW ours(bf16, 0.1, nullptr, FlatAdamW::Kernel::Flat), plain(fp32, 0.1, nullptr, FlatAdamW::Kernel::Flat);
  for (int step = 0; step < 3; ++step) {
    draw_gradients(fp32, 30 + step);
    draw_gradients(bf16, 30 + step);
    ours.step(1e-2, torch::tensor(false));
    plain.step(1e-2, torch::tensor(false));
  }
  EXPECT_TRUE(torch::equal(bf16.params(), fp32.params()));
  EXPECT_TRUE(torch::equal(bf16.weights(), bf16.params().to(torch::kBFloat16)));
  EXPECT_TRUE(torch::equal(b.c, bf16.slot_views(bf16.params()).at("c").to(torch::kBFloat16)));
  const torch::Tensor weights = bf16.weights().clone();
  bf16.grads().fill_(std::numeric_limits<float>::quiet_NaN());
  ours.step(1e-2, torch::tensor(true));
  EXPECT_TRUE(torch::equal(bf16.params(), fp32.params()));
  EXPECT_TRUE(torch::equal(bf16.weights(), weights));
}

TEST(PendingFigures, ReadsBackWhatTheStepComputed) {
  const torch::Tensor figures = torch::tensor({1.5, -2.0, 3.25}, torch::kFloat64);
  PendingFigures pending(figures);
  figures.fill_(0.0);  // the next step reuses nothing of it
  EXPECT_EQ(pending.read(), (std::vector<double>{1.5, -2.0, 3.25}));
}

// Blocked over rows (several blocks here: 3 x 2^22 / 50257 rows), with ignored targets,
// in fp32 against LibTorch's cross-entropy (the loss, 1e-5) and softmax - onehot in fp64
// (the gradient), and on bf16 logits against LibTorch's on their fp32 upcast (the
// gradient then rounded to bf16, as ours is).
TEST(ChunkedCrossEntropy, EqualsLibTorchsCrossEntropyAndItsGradient) {
  torch::manual_seed(7);
  const int64_t n = 250, v = 50257;
  ASSERT_LT(cross_entropy_block_rows(torch::empty({1, v})), n / 2);
  torch::Tensor targets = torch::randint(0, v, {n});
  targets.narrow(0, 10, 5).fill_(-1);
  const torch::Tensor logits = torch::randn({n, v}) * 3;
  for (torch::ScalarType dtype : {torch::kFloat32, torch::kBFloat16}) {
    const torch::Tensor ours_in = logits.to(dtype).clone().requires_grad_(true);
    const torch::Tensor ref_in = logits.to(dtype).to(torch::kFloat32).clone().requires_grad_(true);
    const torch::Tensor ours = chunked_cross_entropy_sum(ours_in, targets);
    const torch::Tensor ref = torch::nn::functional::cross_entropy(
        ref_in, targets.masked_fill(targets < 0, -100),
        torch::nn::functional::CrossEntropyFuncOptions().ignore_index(-100).reduction(torch::kSum));
    EXPECT_EQ(ours.scalar_type(), torch::kFloat32);
    EXPECT_NEAR(ours.item<double>(), ref.item<double>(), 1e-5 * ref.item<double>()) << dtype;
    (ours * 0.5).backward();
    (ref * 0.5).backward();
    EXPECT_EQ(ours_in.grad().scalar_type(), dtype);
    const torch::Tensor got = ours_in.grad().to(torch::kFloat32);
    if (dtype == torch::kFloat32) {
      // Against softmax - onehot in fp64 (LibTorch 1.13's own fp32 gradient is off by up to 6e-6 here).
      torch::Tensor exact = torch::softmax(logits.to(torch::kFloat64), 1);
      exact.scatter_add_(1, targets.clamp_min(0).unsqueeze(1), torch::full({n, 1}, -1.0, exact.options()));
      exact.masked_fill_((targets < 0).unsqueeze(1), 0.0);
      EXPECT_LT((got.to(torch::kFloat64) - exact * 0.5).abs().max().item<double>(), 1e-6);
    } else {
      const torch::Tensor expected = ref_in.grad().to(dtype).to(torch::kFloat32);
      EXPECT_LT((got - expected).abs().max().item<double>(), 8e-3 * expected.abs().max().item<double>());
    }
    EXPECT_EQ(got.narrow(0, 10, 5).abs().max().item<double>(), 0.0) << "ignored rows get no gradient";
  }
}
