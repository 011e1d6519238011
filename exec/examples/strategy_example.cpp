// The strategy API in a few lines, as the original QuintNet's:
//
//   quintnet launch --nproc 4 -- build/bin/example_strategy experiments/configs/vit_dp_tp.yaml
//
// builds the serial ViT, lets the plan's strategy turn it into this rank's part
// (tensor-parallel shards, data-parallel buckets), and trains a few steps on random
// data.  quintnet-train is this loop grown up (data, evaluation, schedules, ...).
#include <torch/torch.h>

#include <cstdio>

#include "core/cli/main_guard.h"
#include "core/plan.h"
#include "exec/comm/communicator.h"
#include "exec/train/strategy.h"

using namespace quintnet;

int main(int argc, char** argv) {
  return core::cli::guarded_main("example_strategy", [&] {
    if (argc != 2) throw core::UserError("usage: example_strategy PLAN.yaml");
    const exec::RankEnv env = exec::read_rank_env();
    const core::Plan plan = core::load_plan(argv[1], env.world_size).plan;
    exec::Communicator comm(env, plan.mesh(), plan.device_type, std::chrono::seconds(60));

    torch::manual_seed(plan.seed);
    exec::ViT serial(plan.model, exec::TpContext{});
    auto strategy = exec::make_strategy(plan.strategy(), comm, plan);
    std::unique_ptr<exec::ParallelModel> model = strategy->apply(serial);
    exec::FlatAdamW optimizer(*model->flat, plan.weight_decay);

    for (int step = 0; step < 5; ++step) {
      torch::manual_seed(step * 100 + comm.mesh().coord(comm.rank(), "dp"));  // each replica its own data
      torch::Tensor x = torch::randn({8, plan.model.in_channels, plan.model.img_size, plan.model.img_size});
      torch::Tensor y = torch::randint(0, plan.model.num_classes, {8});
      model->flat->zero_grad();
      torch::Tensor loss = torch::nn::functional::cross_entropy(model->model(x), y);
      loss.backward();
      if (model->dp) model->dp->finish();  // gradients averaged over the dp group
      optimizer.step(plan.learning_rate);
      if (comm.rank() == 0) std::printf("strategy %s, step %d, loss %.4f\n", strategy->name().c_str(), step, loss.item<double>());
    }
    return 0;
  });
}
