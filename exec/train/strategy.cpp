#include "exec/train/strategy.h"

#include <algorithm>

#include "core/error.h"
#include "core/stage_balance.h"
#include "exec/models/serial_state.h"

namespace quintnet::exec {
namespace {

class MeshStrategy : public Strategy {
 public:
  MeshStrategy(std::string name, bool use_dp, bool use_tp, bool use_pp, Communicator& comm, const core::Plan& plan)
      : name_(std::move(name)), use_dp_(use_dp), use_tp_(use_tp), use_pp_(use_pp), comm_(comm), plan_(plan) {}

  std::string name() const override { return name_; }

  std::unique_ptr<ParallelModel> apply(std::shared_ptr<StageModel> serial) override {
    auto pm = std::make_unique<ParallelModel>();
    if (use_tp_) {
      pm->tp = TpContext{&comm_, &comm_.axis("tp")};
      pm->tp.sequence_parallel = plan_.sequence_parallel;
    }
    const int pp = use_pp_ ? comm_.axis("pp").size() : 1, pp_rank = use_pp_ ? comm_.axis("pp").rank : 0;
    const int chunks = use_pp_ ? plan_.virtual_stages : 1;
    pm->num_stages = pp * chunks;
    // Layers per stage by the cost model (the embedding and head weigh on the end stages).
    const auto ranges = core::balanced_stages(core::model_dims(plan_.model, plan_.max_seq_length), pp * chunks);
    SerialState state;
    for (const auto& p : serial->named_parameters()) state[p.key()] = p.value().detach();
    const torch::Device device = serial->parameters().front().device();

    for (int c = 0; c < chunks; ++c) {
      ModelChunk chunk;
      chunk.stage = c * pp + pp_rank;
      const core::LayerRange r = ranges[chunk.stage];
      chunk.range = StageRange{r.first, r.end};
      chunk.model = serial->make_stage(pm->tp, chunk.range);
      chunk.model->to(device);
      load_serial_state(*chunk.model, state, pm->tp);
      chunk.flat = std::make_unique<FlatParameters>(*chunk.model, tp_shard_dims(*chunk.model));
      if (use_dp_) {
        Group& dp = comm_.axis("dp");
        // Every replica starts from dp rank 0's weights (as DistributedDataParallel does).
        comm_.broadcast(dp, chunk.flat->params(), 0);
        chunk.dp = std::make_unique<GradBuckets>(*chunk.flat, comm_, dp, plan_.bucket_size_mb);
      }
      pm->chunks.push_back(std::move(chunk));
    }
    return pm;
  }

 private:
  std::string name_;
  bool use_dp_, use_tp_, use_pp_;
  Communicator& comm_;
  const core::Plan& plan_;
};

}  // namespace

std::unique_ptr<Strategy> make_strategy(const std::string& name, Communicator& comm, const core::Plan& plan) {
  const std::vector<std::string> axes = core::strategy_axes(name);
  if (axes.empty())
    throw core::UserError("strategy_name: unknown strategy '" + name + "'; choose one of dp, tp, pp, dp_tp, dp_pp, "
                          "tp_pp, 3d");
  auto uses = [&](const char* axis) { return std::find(axes.begin(), axes.end(), axis) != axes.end(); };
  return std::make_unique<MeshStrategy>(name, uses("dp"), uses("tp"), uses("pp"), comm, plan);
}

}  // namespace quintnet::exec
