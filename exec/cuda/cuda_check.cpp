// quintnet-cuda-check: the CUDA checks of experiments/gpu/check.sh.  A plain program
// (GPU machines may lack GoogleTest) that prints one PASS/FAIL line per check and
// exits non-zero when any fails.  Without a GPU it says so and exits 77, which ctest
// reports as skipped (tests/exec/CMakeLists.txt): builds with CUDA compile and link it
// on machines that have none.
//   1. ColumnParallelLinear on CUDA equals the CPU result (float32, 1e-4).
//   2. A one-rank NCCL communicator all-reduces a CUDA tensor.
//   3. ViT training steps on one GPU: loss falls and matches the CPU run (1e-3 relative).
#include <torch/torch.h>

#include <cstdio>
#include <functional>
#include <string>

#include "exec/comm/c10d_compat.h"
#include "exec/models/vit.h"
#include "exec/dp/flat_parameters.h"
#include "exec/parallel/flat_adamw.h"

#include <torch/csrc/distributed/c10d/HashStore.hpp>

using namespace quintnet;

namespace {

int failures = 0;

void check(const std::string& name, const std::function<std::string()>& body) {
  try {
    const std::string problem = body();
    std::printf("%s %s%s%s\n", problem.empty() ? "PASS" : "FAIL", name.c_str(), problem.empty() ? "" : ": ",
                problem.c_str());
    failures += !problem.empty();
  } catch (const std::exception& e) {
    std::printf("FAIL %s: %s\n", name.c_str(), e.what());
    ++failures;
  }
}

std::vector<double> train_losses(torch::Device device, int steps) {
  torch::manual_seed(0);
  exec::ViT model(core::VitConfig{}, exec::TpContext{});
  model->to(device);
  exec::FlatParameters flat(*model, {});
  exec::FlatAdamW opt(flat, 0.01);
  std::vector<double> losses;
  for (int s = 0; s < steps; ++s) {
    torch::manual_seed(100 + s);
    torch::Tensor x = torch::randn({64, 1, 28, 28}).to(device);
    torch::Tensor y = torch::randint(0, 10, {64}).to(device);
    flat.zero_grad();
    torch::Tensor loss = torch::nn::functional::cross_entropy(model(x), y);
    loss.backward();
    opt.step(1e-3);
    losses.push_back(loss.item<double>());
  }
  return losses;
}

}  // namespace

int main() {
  if (!torch::cuda::is_available()) {
    std::printf("skipped: no GPU (torch::cuda::is_available() is false); the CUDA checks need one\n");
    return 77;
  }
  torch::globalContext().setAllowTF32CuBLAS(false);  // compare float32 with float32
  check("column-parallel linear on CUDA equals CPU", [] {
    torch::manual_seed(1);
    exec::ColumnParallelLinear layer(256, 512, exec::TpContext{});
    torch::Tensor x = torch::randn({32, 256});
    torch::Tensor cpu = layer(x);
    layer->to(torch::kCUDA);
    torch::Tensor gpu = layer(x.cuda()).cpu();
    const double diff = (cpu - gpu).abs().max().item<double>();
    return diff < 1e-4 ? std::string() : "max difference " + std::to_string(diff);
  });
  check("one-rank NCCL all-reduce", [] {
    auto store = c10::make_intrusive<c10d::HashStore>();
    auto nccl = exec::make_nccl(store, 0, 1, std::chrono::seconds(60));
    std::vector<at::Tensor> t{torch::full({1024}, 3.0, torch::kCUDA)};
    nccl->allreduce(t)->wait();
    const double v = t[0].sum().item<double>();
    return v == 3.0 * 1024 ? std::string() : "sum " + std::to_string(v);
  });
  check("ViT training on one GPU matches CPU", [] {
    const auto cpu = train_losses(torch::kCPU, 10), gpu = train_losses(torch::kCUDA, 10);
    for (size_t i = 0; i < cpu.size(); ++i)
      if (std::abs(cpu[i] - gpu[i]) > 1e-3 * std::abs(cpu[i]))
        return "step " + std::to_string(i + 1) + ": cpu " + std::to_string(cpu[i]) + " gpu " + std::to_string(gpu[i]);
    return gpu.back() < gpu.front() ? std::string() : std::string("loss did not fall");
  });
  std::printf("%d passed, %d failed\n", 3 - failures, failures);
  return failures == 0 ? 0 : 1;
}
