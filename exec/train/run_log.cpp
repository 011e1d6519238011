#include "exec/train/run_log.h"

#include <torch/torch.h>

#include <algorithm>
#include <cmath>
#include <cstdio>

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "core/schedule.h"
#include "core/stage_balance.h"
#include "exec/kernels/blas_threads.h"
#include "exec/models/registry.h"

namespace quintnet::exec {

RunLog::RunLog(const core::Plan& plan, const TrainOptions& options, bool is_logger)
    : plan_(plan), options_(options), on_(is_logger) {
  if (on_ && !options.metrics_path.empty()) {
    metrics_.open(options.metrics_path, std::ios::trunc);
    if (!metrics_) throw core::UserError("--metrics: cannot write " + options.metrics_path);
  }
}

void RunLog::start(const TrainingData& data, long steps_per_epoch, int side_by_side, const std::string& communication,
                   const core::RunLayout& layout) {
  if (!on_) return;
  const core::Plan& p = plan_;
  std::printf("training %s (%s) on %s (%s, %s): %s, %ld steps/epoch, global batch %d = micro %d x %d "
              "microbatches x dp %d\n",
              p.model.kind().c_str(), core::name_of(p.precision).c_str(), p.mesh().shape_string().c_str(), p.strategy().c_str(),
              core::schedule_kind_name(p.schedule_kind()), data.describe().c_str(), steps_per_epoch, p.batch_size,
              p.micro_batch_size(), p.microbatches(), p.dp());
  // LibTorch's count on each thread that computes a microbatch.
  const int intra_op = side_by_side > 1 ? std::max(1, torch::get_num_threads() / side_by_side) : torch::get_num_threads();
  if (side_by_side > 1)
    std::printf("microbatches: %d side by side, %d intra-op thread(s) each\n", side_by_side, intra_op);
  // The BLAS pool's size is said because it decides the speed as much as LibTorch's count
  // (exec/kernels/blas_threads.h, exec/pp/one_pool_threads.h).
  if (const int pool = kernels::blas_threads())
    std::printf("threads: LibTorch %d, BLAS %s %d per rank\n", intra_op, kernels::blas_description().c_str(), pool);
  if (!communication.empty()) std::printf("%s\n", communication.c_str());
  if (layout.stage_count() > 1)
    std::printf("pipeline: %s\n", core::stage_balance_note(layout.model, layout.stages).c_str());
  if (options_.evaluate)
    std::printf(model_entry(p.model).language_model
                    ? "\n| Epoch | Train Loss | Train PPL | Val Loss | Val PPL |\n"
                      "|-------|------------|-----------|----------|---------|\n"
                    : "\n| Epoch | Train Loss | Train Acc | Val Loss | Val Acc |\n"
                      "|-------|------------|-----------|----------|---------|\n");
  std::fflush(stdout);
}

void RunLog::resumed(const std::string& checkpoint, const LoadedCheckpoint& loaded, long total_steps) {
  if (!on_) return;
  const Manifest& m = loaded.manifest;
  std::printf("resumed from %s at step %ld", checkpoint.c_str(), m.step);
  if (loaded.resharded)
    std::printf(" (written on dp %d x tp %d x pp %d x cp %d, %d chunk(s) per rank)", m.dp, m.tp, m.pp, m.cp, m.chunks);
  std::printf("; rank 0 read %d of its %zu shards (%.1f MB)\n", loaded.shards_read, m.shards.size(), loaded.bytes_read / 1e6);
  if (m.total_steps != total_steps)
    std::printf("note: the checkpoint's run planned %ld steps, this one %ld: the learning-rate schedule differs\n",
                m.total_steps, total_steps);
}

void RunLog::step(long step, int epoch, double loss, double lr, double grad_norm, double rate,
                  const std::vector<double>& mb_losses, bool skipped) {
  if (!metrics_.is_open()) return;
  // NaN and infinities are written as null: every line stays JSON.
  nlohmann::ordered_json line{{"step", step},      {"epoch", epoch},         {"loss", loss},
                              {"lr", lr},          {"grad_norm", grad_norm}, {"samples_per_s", rate},
                              {"mb_losses", mb_losses}};
  if (skipped) line["skipped"] = true;
  metrics_ << line.dump() << '\n' << std::flush;
}

void RunLog::epoch(int epoch, double train_loss, double train_accuracy, double val_loss, double val_accuracy) {
  if (!on_) return;
  if (model_entry(plan_.model).language_model)
    std::printf("| %5d | %10.4f | %9.2f | %8.4f | %7.2f |\n", epoch, train_loss, std::exp(train_loss), val_loss,
                std::exp(val_loss));
  else
    std::printf("| %5d | %10.4f | %8.2f%% | %8.4f | %6.2f%% |\n", epoch, train_loss, 100 * train_accuracy, val_loss,
                100 * val_accuracy);
  std::fflush(stdout);
}

void RunLog::message(const std::string& line) {
  if (!on_) return;
  std::printf("%s\n", line.c_str());
  std::fflush(stdout);
}

void RunLog::done(const TrainResult& r) {
  if (!on_) return;
  std::printf("done: %ld steps in %.1f s, %.1f samples/s, final train loss %.4f", r.steps, r.wall_s,
              r.samples_per_s, r.final_train_loss);
  if (r.skipped_steps > 0) std::printf(" (%ld non-finite steps skipped)", r.skipped_steps);
  std::printf("\n");
}

}  // namespace quintnet::exec
