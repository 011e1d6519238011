#pragma once
// Symmetry with exceptions: which data-parallel replicas a reduced step simulates, what
// each stands for, and how the simulated ones meet at the data-parallel collectives.
//
// A what-if touches few replicas: a straggler or a slow node slows the replicas with a
// rank on it, a degraded or failed NIC the replicas with a rank on its node.  Every
// touched replica is simulated as itself (its ranks where they sit in the full step, its
// what-ifs), and one untouched replica stands for all the others.  They are coupled where
// replicas meet, the DP collectives of each (pipeline rank, tp rank) group: a ring
// all-reduce cannot end for anyone before every member has contributed, and its ring moves
// at its slowest hop's pace, so each collective starts when the last simulated member
// arrives and ends for all when the last one's transfer ends.  The full simulation's DP
// collectives meet the same way, every replica a member.
//
// Jitter touches every replica.  Then `kJitterSamples` untouched replicas are simulated,
// each with the random streams its ranks have in the full step, and each DP collective
// starts no earlier than the expected latest arrival of all the untouched replicas: with
// the sampled arrivals' mean m and standard deviation s, m + s E[max of n standard
// normals] for n untouched replicas.  The assumption: replicas' arrival times at a
// collective are independent and normal (each is a sum of many jittered ops).
#include <memory>
#include <string>
#include <vector>

#include <simgrid/s4u/Barrier.hpp>

#include "sim/platform.h"
#include "sim/step_costs.h"

namespace quintnet::sim {

constexpr int kJitterSamples = 16;

struct ReplicaClasses {
  std::vector<int> simulated;   // the replica index (in the full step) of each simulated replica
  std::vector<int> stands_for;  // per simulated replica: the full step's replicas it stands for
  std::vector<int> class_of;    // per replica of the full step: the simulated replica standing for it
  // Jitter: the simulated replicas sampled from the untouched ones, and how many untouched
  // replicas the full step has (0: no extrapolation).
  std::vector<int> samples;
  int untouched = 0;
  // Whether the simulated replicas stand for different numbers of replicas.
  bool unequal() const;
};

// Every replica simulated as itself (`dp` replicas): a full simulation.
ReplicaClasses all_replicas(int dp);

// The replicas a reduced step simulates (the platform's what-ifs already applied).
ReplicaClasses replica_classes(const StepCosts& costs, const Platform& platform);

// In words, for the summary line: "2 of 1024 data-parallel replicas simulated (replica 5
// with its what-ifs; replica 0 for the other 1023), --exact simulates all".
std::string describe_replicas(const ReplicaClasses& classes);

// E[max of n independent standard normals] (n >= 1).
double expected_max_of_normals(int n);

// Where the simulated members of one DP group (same pipeline rank and tp rank, one per
// simulated replica) meet, once per collective, in the order they run them.
class ReplicaMeeting {
 public:
  ReplicaMeeting(const ReplicaClasses& classes);
  // Waits until the collective may start for member `member` (its simulated replica).
  void arrive(int member);
  // Waits until every member's transfer has ended.
  void leave();

 private:
  const ReplicaClasses& classes_;
  simgrid::s4u::BarrierPtr barrier_;
  std::vector<double> arrivals_;  // of the collective in progress, per member
};

}  // namespace quintnet::sim
