#include "exec/parallel/strategy.h"

#include "exec/models/serial_state.h"

namespace quintnet::exec {
namespace {

class MeshStrategy : public Strategy {
 public:
  MeshStrategy(Communicator& comm, const core::RunLayout& layout) : comm_(comm), layout_(layout) {}

  std::string name() const override { return layout_.strategy; }

  std::unique_ptr<ParallelModel> apply(std::shared_ptr<StageModel> serial) override {
    using core::Axis;
    auto pm = std::make_unique<ParallelModel>();
    if (layout_.uses(Axis::Tp)) {
      pm->tp = TpContext{&comm_, &comm_.axis(Axis::Tp)};
      pm->tp.sequence_parallel = layout_.plan.sequence_parallel;
    }
    const int pp = layout_.pp, pp_rank = comm_.axis(Axis::Pp).rank;
    pm->num_stages = layout_.stage_count();
    SerialState state;
    for (const auto& p : serial->named_parameters()) state[p.key()] = p.value().detach();
    const torch::Device device = serial->parameters().front().device();

    for (int c = 0; c < layout_.chunks; ++c) {
      ModelChunk chunk;
      chunk.stage = c * pp + pp_rank;
      // Layers per stage by the cost model (the embedding and head weigh on the end stages).
      const core::LayerRange r = layout_.stages[chunk.stage];
      chunk.range = StageRange{r.first, r.end};
      chunk.model = serial->make_stage(pm->tp, chunk.range);
      if (layout_.uses(Axis::Cp)) chunk.model->use_context_parallel(CpContext{&comm_, &comm_.axis(Axis::Cp)});
      chunk.model->to(device);
      load_serial_state(*chunk.model, state, pm->tp);
      chunk.flat = std::make_unique<FlatParameters>(*chunk.model, tp_shard_dims(*chunk.model), weight_dtype());
      if (layout_.uses(Axis::Dp) || layout_.uses(Axis::Cp)) {
        // The replicas: dp, and the cp ranks, which hold the same weights too.
        Group& replicas = comm_.replicas();
        // Every replica starts from rank 0's weights (as DistributedDataParallel does).
        comm_.broadcast(replicas, chunk.flat->params(), 0);
        chunk.flat->refresh_weights();
        chunk.dp = std::make_unique<GradBuckets>(*chunk.flat, comm_, replicas, layout_.plan.bucket_size_mb);
      }
      pm->chunks.push_back(std::move(chunk));
    }
    return pm;
  }

 private:
  // What the model computes with: bfloat16 under `precision: bf16_weights` (fp32 masters
  // kept by FlatParameters), else fp32 — autocast's bf16 casts the fp32 weights op by op.
  torch::ScalarType weight_dtype() const {
    return layout_.plan.precision == core::Precision::Bf16Weights ? torch::kBFloat16 : torch::kFloat32;
  }

  Communicator& comm_;
  const core::RunLayout& layout_;
};

}  // namespace

std::unique_ptr<Strategy> make_strategy(Communicator& comm, const core::RunLayout& layout) {
  return std::make_unique<MeshStrategy>(comm, layout);
}

}  // namespace quintnet::exec
