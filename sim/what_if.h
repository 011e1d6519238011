#pragma once
// What-if inputs from the command line, applied to a Platform before a step is
// simulated: stragglers (slow ranks or nodes), degraded or failed NICs, per-op jitter.
// Each breaks the symmetry of data-parallel replicas: the reduced model simulates the
// replicas they touch beside a stand-in for the others (sim/replica_classes.h).
#include <random>
#include <string>

#include "sim/platform.h"

namespace quintnet::sim {

// Stragglers: `ranks` "5:0.8,17:0.9" (rank:speed factor) and `nodes` "3:0.5" (every rank
// of node 3), for a step of `world` ranks.  Throws core::UserError naming the option and
// the bad part (a rank past the world, a factor outside (0, 100]).
void add_stragglers(Platform& p, const std::string& ranks, const std::string& nodes, int world);

// NICs: `slow` "3/2:0.5,4/*:0.25" (node/nic:bandwidth factor in (0, 1]; * every NIC of
// the node) and `failed` "3/2,5/*" (bandwidth 0: the GPUs behind it use the node's next
// working NIC).  Throws core::UserError for a bad part, a node outside the step's
// `world` ranks, a platform whose links are not built from NICs (SimGrid XML, shared
// CPU cores), or a node of the step left with no working NIC.
void add_nic_faults(Platform& p, const std::string& slow, const std::string& failed, int world);

// Jitter: "normal:0.05" or "lognormal:0.1" (distribution:coefficient of variation in
// [0, 1]), drawn from `seed`.  Throws core::UserError for anything else.
Jitter parse_jitter(const std::string& spec, uint64_t seed);

// One rank's jitter factors, one per op, in the order its ops run: its own random
// stream (from the seed and the rank), so a draw does not depend on how SimGrid
// interleaves the ranks.
class OpJitter {
 public:
  OpJitter(const Jitter& jitter, int rank);
  double factor();  // 1 without jitter

 private:
  Jitter jitter_;
  std::mt19937_64 rng_;
  std::normal_distribution<double> normal_;
};

}  // namespace quintnet::sim
