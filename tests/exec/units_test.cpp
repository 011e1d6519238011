// In-process checks of exec's building blocks against serial references.
#include <gtest/gtest.h>
#include <torch/torch.h>
#include <zlib.h>

#include <algorithm>
#include <fstream>

#include "core/error.h"
#include "exec/data/batch_sampler.h"
#include "exec/data/idx_dataset.h"
#include "exec/kernels/blas_threads.h"
#include "exec/pp/microbatch_threads.h"
#include "exec/pp/one_pool_threads.h"
#include "exec/tp/parallel_linear.h"
#include "exec/train/cpu_allocator.h"

using namespace quintnet::exec;

TEST(ColumnParallelLinear, ForwardEqualsTheSerialSliceBitwise) {
  torch::set_num_threads(1);
  torch::manual_seed(3);
  const int64_t in = 64, out = 256;
  // The serial layer: the same class with a tp group of one.
  ColumnParallelLinear serial(in, out, TpContext{nullptr, nullptr, /*bitwise_invariant=*/true});
  torch::Tensor x = torch::randn({5, 7, in});
  torch::Tensor full = serial(x);
  for (int tp = 2; tp <= 8; tp *= 2)
    for (int r = 0; r < tp; ++r) {
      // Forward of a column-parallel layer communicates nothing: a group of the right
      // size and rank is all it needs here.
      Group group;
      group.ranks.resize(tp);
      group.rank = r;
      TpContext ctx{nullptr, &group, /*bitwise_invariant=*/true};
      ColumnParallelLinear col(in, out, ctx);
      col->load_full(serial->weight, serial->bias);
      torch::Tensor mine = col(x);
      torch::Tensor expected = full.chunk(tp, -1)[r];
      EXPECT_TRUE(torch::equal(mine, expected))
          << "tp " << tp << " rank " << r << " max diff " << (mine - expected).abs().max().item<float>();
    }
}

TEST(ColumnParallelLinear, ByDefaultOneGemmPerShardWithinRoundingOfTheSerialSlice) {
  torch::set_num_threads(1);
  torch::manual_seed(3);
  const int64_t in = 64, out = 256;
  ColumnParallelLinear serial(in, out, TpContext{});
  torch::Tensor x = torch::randn({5, 7, in});
  torch::Tensor full = serial(x);
  for (int r = 0; r < 4; ++r) {
    Group group;
    group.ranks.resize(4);
    group.rank = r;
    ColumnParallelLinear col(in, out, TpContext{nullptr, &group});
    col->load_full(serial->weight, serial->bias);
    torch::Tensor expected = full.chunk(4, -1)[r];
    EXPECT_TRUE(torch::allclose(col(x), expected, 1e-5, 1e-6)) << "rank " << r;
  }
}

TEST(BatchSampler, GlobalBatchIsTheSameWhateverTheLayout) {
  BatchSampler sampler(1000, 32, 7);
  for (int epoch = 0; epoch < 2; ++epoch)
    for (int64_t b = 0; b < 3; ++b) {
      std::vector<int64_t> global = sampler.global_batch(epoch, b);
      for (int dp : {1, 2, 4})
        for (int m : {1, 2, 4}) {
          std::vector<int64_t> all;
          for (int d = 0; d < dp; ++d)
            for (int j = 0; j < m; ++j) {
              auto mb = sampler.microbatch(epoch, b, d, dp, j, m);
              EXPECT_EQ(static_cast<int>(mb.size()), 32 / dp / m);
              all.insert(all.end(), mb.begin(), mb.end());
            }
          EXPECT_EQ(all, global) << "dp " << dp << " m " << m;
        }
    }
  EXPECT_NE(sampler.global_batch(0, 0), sampler.global_batch(1, 0));  // reshuffled per epoch
  EXPECT_EQ(BatchSampler(1000, 32, 7).global_batch(1, 2), sampler.global_batch(1, 2));
}

namespace {

void write_idx(const std::string& path, bool gz, uint32_t magic, std::vector<uint32_t> dims,
               const std::vector<uint8_t>& body) {
  std::vector<uint8_t> bytes;
  auto put = [&](uint32_t v) {
    for (int s = 24; s >= 0; s -= 8) bytes.push_back(static_cast<uint8_t>(v >> s));
  };
  put(magic);
  for (uint32_t d : dims) put(d);
  bytes.insert(bytes.end(), body.begin(), body.end());
  if (gz) {
    gzFile f = gzopen((path + ".gz").c_str(), "wb");
    gzwrite(f, bytes.data(), static_cast<unsigned>(bytes.size()));
    gzclose(f);
  } else {
    std::ofstream(path, std::ios::binary).write(reinterpret_cast<const char*>(bytes.data()), bytes.size());
  }
}

}  // namespace

TEST(IdxDataset, ReadsPlainAndGzipFiles) {
  const std::string dir = ::testing::TempDir() + "/idx";
  std::system(("mkdir -p " + dir).c_str());
  std::vector<uint8_t> pixels(3 * 4 * 5);
  for (size_t i = 0; i < pixels.size(); ++i) pixels[i] = static_cast<uint8_t>(i);
  write_idx(dir + "/train-images-idx3-ubyte", true, 0x803, {3, 4, 5}, pixels);
  write_idx(dir + "/train-labels-idx1-ubyte", false, 0x801, {3}, {2, 0, 7});
  ImageDataset d = load_idx_dataset(dir, "train");
  EXPECT_EQ(d.count, 3);
  EXPECT_EQ(d.rows, 4);
  EXPECT_EQ(d.cols, 5);
  EXPECT_EQ(d.pixels, pixels);
  EXPECT_EQ(d.labels, (std::vector<uint8_t>{2, 0, 7}));
  EXPECT_EQ(d.num_classes, 8);
}

TEST(IdxDataset, TruncatedOrMissingFilesGiveTheirMessage) {
  const std::string dir = ::testing::TempDir() + "/idx_bad";
  std::system(("mkdir -p " + dir).c_str());
  write_idx(dir + "/train-images-idx3-ubyte", false, 0x803, {3, 4, 5}, std::vector<uint8_t>(50));
  write_idx(dir + "/train-labels-idx1-ubyte", false, 0x801, {3}, {1, 2, 3});
  try {
    load_idx_dataset(dir, "train");
    FAIL();
  } catch (const quintnet::core::UserError& e) {
    EXPECT_NE(std::string(e.what()).find("truncated"), std::string::npos) << e.what();
  }
  try {
    load_idx_dataset(dir, "t10k");
    FAIL();
  } catch (const quintnet::core::UserError& e) {
    EXPECT_NE(std::string(e.what()).find("t10k-images-idx3-ubyte"), std::string::npos) << e.what();
  }
}

TEST(IdxDataset, FashionMnistFromSetupLoads) {
  const std::string dir = "/usr/share/datasets/fashion-mnist";
  ImageDataset d = load_idx_dataset(dir, "t10k");
  EXPECT_EQ(d.count, 10000);
  EXPECT_EQ(d.rows, 28);
  EXPECT_EQ(d.num_classes, 10);
}

#include "exec/models/vit.h"
#include "exec/dp/flat_parameters.h"

TEST(FlatParameters, BackwardAccumulatesIntoTheFlatGradientBuffer) {
  quintnet::core::VitConfig cfg;
  cfg.depth = 2;
  torch::manual_seed(1);
  ViT model(cfg, TpContext{});
  std::vector<torch::Tensor> before;
  for (auto& p : model->parameters()) before.push_back(p.detach().clone());
  FlatParameters flat(*model, {});
  // Values survive the move into the buffer, and every parameter is a view of it.
  auto params = model->parameters();
  for (size_t i = 0; i < params.size(); ++i) EXPECT_TRUE(torch::equal(params[i], before[i]));
  for (int rep = 0; rep < 2; ++rep) {
    torch::nn::functional::cross_entropy(model(torch::randn({4, 1, 28, 28})), torch::randint(0, 10, {4})).backward();
  }
  double per_param = 0;
  for (auto& p : model->parameters()) {
    const auto* base = flat.grads().data_ptr<float>();
    const auto* g = p.grad().data_ptr<float>();
    EXPECT_TRUE(g >= base && g < base + flat.grads().numel());
    per_param += p.grad().abs().sum().item<double>();
  }
  EXPECT_GT(per_param, 0.0);
  EXPECT_NEAR(flat.grads().abs().sum().item<double>(), per_param, 1e-3 * per_param);
}

#include "exec/precision/autocast.h"

// precision: bf16 on CPU: inside the scope a linear layer computes in bfloat16, the
// weight's gradient (backward outside the scope) comes back fp32, and leaving the scope
// (or a disabled one) restores fp32 arithmetic.
TEST(AutocastScope, ComputesInBfloat16InsideAndFp32Outside) {
  torch::nn::Linear layer(8, 4);
  const torch::Tensor x = torch::randn({3, 8});
  torch::Tensor y;
  {
    AutocastScope scope(true, torch::kCPU);
    y = layer(x);
    EXPECT_EQ(y.scalar_type(), torch::kBFloat16);
  }
  y.to(torch::kFloat32).sum().backward();
  EXPECT_EQ(layer->weight.grad().scalar_type(), torch::kFloat32);
  EXPECT_EQ(layer(x).scalar_type(), torch::kFloat32);
  {
    AutocastScope off(false, torch::kCPU);
    EXPECT_EQ(layer(x).scalar_type(), torch::kFloat32);
  }
}

TEST(CachingCpuAllocator, ReusesLargeBlocksBySizeAndKeepsNoMoreThanItsCap) {
  install_caching_cpu_allocator(std::size_t{64} << 20);
  const CpuAllocatorStats before = caching_cpu_allocator_stats();
  void* first = nullptr;
  {
    torch::Tensor t = torch::empty({1 << 20});  // 4 MiB
    first = t.data_ptr();
  }
  torch::Tensor again = torch::ones({1 << 20});
  EXPECT_EQ(again.data_ptr(), first) << "a freed 4 MiB block is handed out again";
  EXPECT_TRUE(torch::equal(again, torch::ones({1 << 20})));  // and filled as asked
  const CpuAllocatorStats after = caching_cpu_allocator_stats();
  EXPECT_EQ(after.reused - before.reused, 1u);
  { torch::Tensor small = torch::empty({1000}); }  // 4 KB: LibTorch's own allocator
  EXPECT_EQ(caching_cpu_allocator_stats().large_allocations, after.large_allocations);
  { torch::Tensor huge = torch::empty({25 << 20}); }  // 100 MiB > the 64 MiB cap: freed at once
  EXPECT_LE(caching_cpu_allocator_stats().cached_bytes, std::size_t{64} << 20);
}

// Debian's libblas.so.3 is often OpenBLAS's pthreads build, whose pool LibTorch's thread
// count does not reach (exec/kernels/blas_threads.h); where it is, the executor holds it.
TEST(BlasThreads, APthreadsOpenBlasPoolIsHeldToTheCountAsked) {
  const int before = kernels::blas_threads();
  if (before == 0) GTEST_SKIP() << kernels::blas_description() << " has no thread pool of its own";
  ASSERT_TRUE(kernels::set_blas_threads(1));
  EXPECT_EQ(kernels::blas_threads(), 1);
  ASSERT_TRUE(kernels::set_blas_threads(2));
  EXPECT_EQ(kernels::blas_threads(), 2);
  kernels::set_blas_threads(before);
  EXPECT_NE(kernels::blas_description().find("pthreads"), std::string::npos) << kernels::blas_description();
}

// Two workers that call one pool wait on each other (the serial ViT ran at 0.28-0.45x with
// two side by side, docs/PERFORMANCE.md): each worker's products run on the worker.
TEST(BlasThreads, MicrobatchThreadsHoldThePoolToOneThreadAndGiveItBack) {
  const int before = kernels::blas_threads();
  if (before == 0) GTEST_SKIP() << kernels::blas_description() << " has no thread pool of its own";
  kernels::set_blas_threads(2);
  {
    MicrobatchThreads side_by_side(2, 2);
    EXPECT_EQ(kernels::blas_threads(), 1);
    std::vector<float> sums(2);
    side_by_side.run(2, [&](int i) { sums[i] = torch::ones({64, 64}).mm(torch::ones({64, 64})).sum().item<float>(); });
    EXPECT_EQ(sums[0], 64.0f * 64 * 64);
    EXPECT_EQ(sums[1], 64.0f * 64 * 64);
  }
  EXPECT_EQ(kernels::blas_threads(), 2);
  kernels::set_blas_threads(before);
}

// One microbatch at a time: the pool takes the rank's threads and LibTorch's OpenMP one
// (two spinning pools on the same cores ran the ViT at 0.2x, exec/pp/one_pool_threads.h).
TEST(BlasThreads, OneMicrobatchAtATimeGivesTheRanksThreadsToThePool) {
  const int before = kernels::blas_threads(), libtorch = torch::get_num_threads();
  if (before == 0) GTEST_SKIP() << kernels::blas_description() << " has no thread pool of its own";
  torch::set_num_threads(3);
  kernels::set_blas_threads(1);
  {
    OnePoolThreads one_pool;
    EXPECT_EQ(kernels::blas_threads(), 3);
    EXPECT_EQ(torch::get_num_threads(), 1);
  }
  EXPECT_EQ(torch::get_num_threads(), 3);
  torch::set_num_threads(1);
  {
    OnePoolThreads one_thread;  // one thread asked: nothing to give
    EXPECT_EQ(kernels::blas_threads(), 3);
    EXPECT_EQ(torch::get_num_threads(), 1);
  }
  torch::set_num_threads(libtorch);
  kernels::set_blas_threads(before);
}
