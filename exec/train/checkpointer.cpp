#include "exec/train/checkpointer.h"

#include "exec/train/run_log.h"

namespace quintnet::exec {

Checkpointer::Checkpointer(const core::Plan& plan, Communicator& comm, const TrainOptions& options)
    : plan_(plan), comm_(comm), options_(options) {
  if (!options.checkpoint_dir.empty()) writer_.emplace(options.checkpoint_dir, options.checkpoint_keep);
}

Manifest Checkpointer::start(ParallelModel& pm, const Optimizers& optimizers, long total_steps, RunLog& log) const {
  Manifest state;
  if (!options_.resume_path.empty()) {
    const LoadedCheckpoint loaded = load_checkpoint(options_.resume_path, comm_, plan_, pm, optimizers);
    log.resumed(resolve_checkpoint(options_.resume_path), loaded, total_steps);
    state = loaded.manifest;
  }
  // A resumed run may be given another length: the learning-rate schedule follows this run's.
  state.total_steps = total_steps;
  return state;
}

bool Checkpointer::due(long step, long last_step) const {
  return writer_ && (step == last_step || (options_.checkpoint_every > 0 && step % options_.checkpoint_every == 0));
}

std::string Checkpointer::save(ParallelModel& pm, const Optimizers& optimizers, const Manifest& state) {
  const std::string where = writer_->save(comm_, plan_, pm, optimizers, state);
  last_saved_ = state.step;
  return where;
}

}  // namespace quintnet::exec
