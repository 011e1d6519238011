// Measurement of DP bucket overlap, run as 2 ranks (dp_buckets_test asserts on its output): trains a small ViT with DP=2 and
// small buckets, and prints (rank 0) one JSON line per step with the number of
// buckets, the all-reduces launched, and when the first one started relative to the
// end of the backward pass of the last microbatch.
#include <torch/torch.h>

#include <chrono>
#include <cstdio>

#include "core/mesh.h"
#include "exec/comm/communicator.h"
#include "exec/dp/grad_buckets.h"
#include "exec/launch/rank_env.h"
#include "exec/models/vit.h"
#include "exec/dp/flat_parameters.h"

using namespace quintnet;

int main() {
  torch::set_num_threads(1);
  const exec::RankEnv env = exec::read_rank_env();
  exec::Communicator comm(env, core::Mesh::from_axes({env.world_size}, {core::Axis::Dp}), core::Device::Cpu, std::chrono::seconds(30));
  core::VitConfig cfg;
  cfg.depth = 4;
  torch::manual_seed(0);
  exec::ViT model(cfg, exec::TpContext{});
  exec::Group& dp = comm.axis(core::Axis::Dp);
  exec::FlatParameters flat(*model, {});
  exec::GradBuckets buckets(flat, comm, dp, /*bucket_mb=*/0.05);
  const int microbatches = 2;
  for (int step = 0; step < 3; ++step) {
    flat.zero_grad();
    std::chrono::steady_clock::time_point backward_end;
    for (int j = 0; j < microbatches; ++j) {
      torch::manual_seed(100 * step + 10 * j + dp.rank);
      torch::Tensor x = torch::randn({8, 1, 28, 28});
      torch::Tensor y = torch::randint(0, 10, {8});
      buckets.sync_next_backward(j == microbatches - 1);
      torch::nn::functional::cross_entropy(model(x), y).backward();
      backward_end = std::chrono::steady_clock::now();
    }
    buckets.finish();
    // Averaged gradients must be identical on both ranks: compare a checksum.
    torch::Tensor sum = torch::zeros({1}, torch::kFloat64);
    for (auto& p : model->parameters()) sum += p.grad().to(torch::kFloat64).abs().sum();
    torch::Tensor gathered = comm.all_gather(dp, sum, 0);
    const auto& launches = buckets.last_step_launches();
    if (env.rank == 0) {
      const double first_ms =
          launches.empty() ? 0 : std::chrono::duration<double, std::milli>(launches.front().start - backward_end).count();
      std::printf("{\"step\": %d, \"buckets\": %d, \"allreduces\": %zu, \"first_start_minus_backward_end_ms\": %.6f, "
                  "\"grad_checksums\": [%.17g, %.17g]}\n",
                  step, buckets.num_buckets(), launches.size(), first_ms, gathered[0].item<double>(),
                  gathered[1].item<double>());
      std::fflush(stdout);
    }
  }
  return 0;
}
