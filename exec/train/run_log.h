#pragma once
// RunLog — what a training run tells its user, all from global rank 0: the start-up
// lines, the original QuintNet's per-epoch table (accuracy for the classifier,
// perplexity for the language model), one JSON line per optimizer step (--metrics)
// and the closing line.  Other ranks hold a RunLog that says nothing.
#include <fstream>
#include <string>
#include <vector>

#include "core/plan.h"
#include "core/run_layout.h"
#include "exec/checkpoint/checkpoint.h"
#include "exec/data/training_data.h"
#include "exec/train/trainer.h"

namespace quintnet::exec {

class RunLog {
 public:
  // Opens the metrics file (a UserError when it cannot be written).
  RunLog(const core::Plan& plan, const TrainOptions& options, bool is_logger);

  // The run's shape, how microbatches are computed, the pipeline's balance (the stages
  // `layout` runs), the table header.
  void start(const TrainingData& data, long steps_per_epoch, int microbatches_side_by_side, const std::string& communication,
             const core::RunLayout& layout);
  // Where the run continues from, and what rank 0 read of the checkpoint to get there.
  void resumed(const std::string& checkpoint, const LoadedCheckpoint& loaded, long total_steps);
  // One optimizer step: the metrics line (rate: samples/s since training began;
  // skipped: a non-finite step whose optimizer step did not happen).
  void step(long step, int epoch, double loss, double lr, double grad_norm, double rate,
            const std::vector<double>& mb_losses, bool skipped);
  // The epoch table's row; without an evaluation there is no table.
  void epoch(int epoch, double train_loss, double train_accuracy, double val_loss, double val_accuracy);
  void message(const std::string& line);  // one line on standard output
  void done(const TrainResult& result);

 private:
  const core::Plan& plan_;
  const TrainOptions& options_;
  bool on_;
  std::ofstream metrics_;
};

}  // namespace quintnet::exec
