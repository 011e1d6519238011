#pragma once
// FlatAdamW — the optimizer of one rank's chunk, over its flat buffers
// (exec/dp/flat_parameters.h).
#include <torch/torch.h>

#include <cstdint>
#include <memory>
#include <vector>

#include "exec/dp/flat_parameters.h"
#include "exec/dp/zero_shards.h"

namespace quintnet::exec {

// AdamW (decoupled weight decay, bias correction: the same arithmetic as
// torch::optim::AdamW) over the flat buffers.  Two kernels compute it:
//  - flat: a dozen tensor operations per step over the whole buffer (the CPU's: there
//    they beat LibTorch 1.13's per-parameter loop, and a GPU-less build has nothing else);
//  - fused: LibTorch 2.x's _fused_adamw_, one kernel reading each element once, which
//    also skips the step on the device when told to (the GPU's: no host round trip).
// With ZeRO-1 shards (plan `zero_stage: 1`) it keeps the moments of this dp rank's
// pieces only, updates those parameters and all-gathers the rest from the other ranks.
// Under bf16 weights it also takes the fp32 masters over from FlatParameters and keeps
// this rank's pieces of them, and a step gathers the updated bf16 weights (Megatron-LM's
// distributed optimizer: 12/dp bytes of state per parameter, half the gathered bytes).
class FlatAdamW {
 public:
  enum class Kernel { Automatic, Flat, Fused };  // Automatic: fused on CUDA where LibTorch has it
  FlatAdamW(FlatParameters& flat, double weight_decay, std::shared_ptr<ZeroShards> shards = nullptr,
            Kernel kernel = Kernel::Automatic, double beta1 = 0.9, double beta2 = 0.999, double eps = 1e-8);
  // One step; `skip` (a bool tensor on the parameters' device; undefined: never) leaves
  // parameters, moments and the step count as they were — decided on the device by the
  // fused kernel; the flat one reads it, which costs nothing on the CPU.
  void step(double lr, const torch::Tensor& skip = {});
  // The fp32 master weights of the whole buffer, laid out as FlatParameters::params():
  // that buffer itself, or under ZeRO-1 with bf16 weights a passing one all-gathered
  // from the dp ranks' pieces (then collective over dp).  For the final parameters
  // (--save-params); checkpoints write state_pieces() instead.
  torch::Tensor whole_masters();
  bool fused() const { return fused_; }
  bool sharded() const { return shards_ != nullptr; }  // ZeRO-1: this rank holds pieces of the state
  static bool fused_available();  // LibTorch has _fused_adamw_ (2.4 and later: CPU and CUDA)

  long steps() const;  // steps taken (skipped ones not counted); reads the device's count
  void set_steps(long steps);  // resuming from a checkpoint
  // The state this rank writes to a checkpoint: one piece covering the whole buffer, or
  // under ZeRO-1 this rank's pieces — its masters (current on every rank after a step,
  // so any one copy will do) and its moments.  No communication.
  struct StatePiece {
    std::int64_t offset = 0;  // into the flat buffer
    torch::Tensor masters, exp_avg, exp_avg_sq;
  };
  std::vector<StatePiece> state_pieces() const;
  // Resuming: the masters and moments laid out as the whole buffer (on any device), of
  // which only this rank's pieces are read under ZeRO-1 — the rest may hold anything:
  // the other pieces' parameters are then all-gathered from the dp ranks, as after a step
  // (collective over dp).  The bf16 weights follow the masters.
  void load_state(const torch::Tensor& masters, const torch::Tensor& exp_avg, const torch::Tensor& exp_avg_sq);
  // This rank's pieces (offsets and lengths into the flat buffer): one covering it whole
  // without ZeRO-1.
  std::vector<ZeroShards::Range> pieces() const;
  // Bytes of optimizer state this rank holds: the moments, and under bf16 weights the
  // fp32 masters (wherever they are kept; as the simulator's memory model counts them).
  std::int64_t state_bytes() const;

 private:
  void update(torch::Tensor& p, const torch::Tensor& g, double lr, const torch::Tensor& skip);
  // ZeRO-1: every dp rank's `pieces` of the parameters (this rank's, as take() lays them
  // out) into the whole buffer the model computes with — the bf16 weights when this
  // optimizer holds the masters, else the fp32 parameters, which the weights follow.
  // Collective over dp.
  void gather_pieces(const torch::Tensor& pieces);

  FlatParameters& flat_;
  double weight_decay_, beta1_, beta2_, eps_;
  std::shared_ptr<ZeroShards> shards_;  // null: this rank updates every parameter
  torch::Tensor master_pieces_;  // ZeRO-1 with bf16 weights: this rank's pieces of the masters
  bool fused_ = false;
  long step_ = 0;                  // the flat kernel's count
  torch::Tensor device_steps_;     // the fused kernel's: a float on the device, as it reads it
  torch::Tensor exp_avg_, exp_avg_sq_;  // the whole buffer's, or this rank's pieces'
};

}  // namespace quintnet::exec
