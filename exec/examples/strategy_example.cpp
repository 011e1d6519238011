// The strategy API in a few lines, as the original QuintNet's:
//
//   quintnet launch --nproc 8 -- build/bin/example_strategy experiments/configs/vit_3d.yaml
//
// builds the serial ViT, lets the plan's strategy turn it into this rank's part
// (tensor-parallel shards, pipeline stages, data-parallel buckets), and trains a few
// steps on random data with the plan's pipeline schedule.  quintnet-train is this
// loop grown up (data, evaluation, clipping, learning-rate schedule, ...).
#include <torch/torch.h>

#include <cstdio>

#include "core/cli/main_guard.h"
#include "core/plan.h"
#include "exec/comm/communicator.h"
#include "core/run_layout.h"
#include "exec/pp/pipeline_runner.h"
#include "exec/models/vit.h"
#include "exec/parallel/flat_adamw.h"
#include "exec/parallel/strategy.h"

using namespace quintnet;

int main(int argc, char** argv) {
  return core::cli::guarded_main("example_strategy", [&] {
    if (argc != 2) throw core::UserError("usage: example_strategy PLAN.yaml");
    const exec::RankEnv env = exec::read_rank_env();
    // The plan resolved once: mesh, strategy, schedule and stages (core/run_layout.h).
    const core::RunLayout layout = core::resolve_layout(core::load_plan(argv[1], env.world_size).plan);
    const core::Plan& plan = layout.plan;
    exec::Communicator comm(env, layout.mesh, plan.device_type, std::chrono::seconds(60));

    torch::manual_seed(plan.seed);
    const core::VitConfig& vit = plan.model.as<core::VitConfig>();  // this example trains the ViT
    exec::ViT serial(vit, exec::TpContext{});
    auto strategy = exec::make_strategy(comm, layout);
    std::unique_ptr<exec::ParallelModel> model = strategy->apply(serial.ptr());
    std::vector<std::unique_ptr<exec::FlatAdamW>> optimizers;
    for (auto& chunk : model->chunks) optimizers.push_back(std::make_unique<exec::FlatAdamW>(*chunk.flat, plan.weight_decay));
    const int m = layout.microbatches, b = layout.micro_batch_size;
    const int64_t tokens = (vit.img_size / vit.patch_size) * (vit.img_size / vit.patch_size) + 1;
    exec::PipelineRunner runner(layout.schedule, *model, comm, tokens, vit.hidden_dim);

    for (int step = 0; step < 5; ++step) {
      torch::manual_seed(step * 100 + comm.mesh().coord(comm.rank(), core::Axis::Dp));  // each replica its own data
      std::vector<torch::Tensor> inputs, labels;
      for (int j = 0; j < m; ++j) {
        inputs.push_back(torch::randn({b, vit.in_channels, vit.img_size, vit.img_size}));
        labels.push_back(torch::randint(0, vit.num_classes, {b}));
      }
      for (auto& chunk : model->chunks) chunk.flat->zero_grad();
      const exec::StepStats stats = runner.train_step(inputs, labels);  // forward, backward, DP sync
      for (auto& opt : optimizers) opt->step(plan.learning_rate);
      const double loss = stats.read().loss;  // waits for the step (the trainer reads a step late)
      if (comm.rank() == 0) std::printf("strategy %s, step %d, loss %.4f\n", strategy->name().c_str(), step, loss);
    }
    return 0;
  });
}
