#include "exec/train/strategy.h"

#include <algorithm>

#include "core/error.h"

namespace quintnet::exec {
namespace {

class MeshStrategy : public Strategy {
 public:
  MeshStrategy(std::string name, bool use_dp, bool use_tp, Communicator& comm, const core::Plan& plan)
      : name_(std::move(name)), use_dp_(use_dp), use_tp_(use_tp), comm_(comm), plan_(plan) {}

  std::string name() const override { return name_; }

  std::unique_ptr<ParallelModel> apply(ViT serial) override {
    auto pm = std::make_unique<ParallelModel>();
    if (use_tp_) pm->tp = TpContext{&comm_, &comm_.axis("tp")};
    pm->model = ViT(serial->config(), pm->tp);
    pm->model->to(serial->parameters().front().device());
    SerialState state;
    for (const auto& p : serial->named_parameters()) state[p.key()] = p.value().detach();
    load_serial_state(*pm->model, state, pm->tp);

    pm->flat = std::make_unique<FlatParameters>(*pm->model, tp_shard_dims(*pm->model));
    if (use_dp_) {
      Group& dp = comm_.axis("dp");
      // Every replica starts from dp rank 0's weights (as DistributedDataParallel does).
      comm_.broadcast(dp, pm->flat->params(), 0);
      pm->dp = std::make_unique<GradBuckets>(*pm->flat, comm_, dp, plan_.bucket_size_mb);
    }
    return pm;
  }

 private:
  std::string name_;
  bool use_dp_, use_tp_;
  Communicator& comm_;
  const core::Plan& plan_;
};

}  // namespace

std::unique_ptr<Strategy> make_strategy(const std::string& name, Communicator& comm, const core::Plan& plan) {
  const auto known = core::strategy_names();
  if (std::find(known.begin(), known.end(), name) == known.end())
    throw core::UserError("strategy_name: unknown strategy '" + name + "'; choose one of dp, tp, pp, dp_tp, dp_pp, "
                          "tp_pp, 3d");
  auto uses = [&](const char* axis) { return name == "3d" || name.find(axis) != std::string::npos; };
  if (uses("pp") && plan.pp() > 1)
    throw core::UserError("strategy_name: '" + name + "' with pp = " + std::to_string(plan.pp()) +
                          " needs pipeline parallelism, which the executor does not run yet; "
                          "set pp to 1 in mesh_dim (dp, tp and dp x tp run)");
  return std::make_unique<MeshStrategy>(name, uses("dp"), uses("tp"), comm, plan);
}

}  // namespace quintnet::exec
