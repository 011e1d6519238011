#include "sim/replica_classes.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <set>
#include <simgrid/s4u.hpp>

#include "core/mesh.h"

namespace sg4 = simgrid::s4u;

namespace quintnet::sim {

bool ReplicaClasses::unequal() const {
  return std::any_of(stands_for.begin(), stands_for.end(), [&](int n) { return n != stands_for.front(); });
}

ReplicaClasses all_replicas(int dp) {
  ReplicaClasses c;
  for (int d = 0; d < dp; ++d) {
    c.simulated.push_back(d);
    c.stands_for.push_back(1);
    c.class_of.push_back(d);
  }
  return c;
}

namespace {

// The replicas with a rank that a straggler, a slow node or a NIC fault touches.
std::set<int> touched_replicas(const StepCosts& costs, const Platform& p) {
  const core::Mesh full = core::Mesh::from_axes({costs.dp, costs.tp, costs.schedule.pp}, core::all_axes());
  std::set<int> touched;
  for (const auto& [rank, factor] : p.rank_speed) touched.insert(full.coord(rank, core::Axis::Dp));
  for (const auto& [key, factor] : p.nic_factor) {
    const int node = key / p.nics_per_node;
    for (int r = node * p.gpus_per_node; r < std::min(full.world_size(), (node + 1) * p.gpus_per_node); ++r)
      touched.insert(full.coord(r, core::Axis::Dp));
  }
  return touched;
}

}  // namespace

ReplicaClasses replica_classes(const StepCosts& costs, const Platform& p) {
  const std::set<int> touched = touched_replicas(costs, p);
  const int untouched = costs.dp - static_cast<int>(touched.size());
  // Stand-ins for the untouched replicas: one, or a sample of them under jitter.
  const int stand_ins = std::min(untouched, p.jitter.active() ? kJitterSamples : 1);
  std::vector<int> chosen;
  for (int d = 0; d < costs.dp && static_cast<int>(chosen.size()) < stand_ins; ++d)
    if (!touched.count(d)) chosen.push_back(d);
  ReplicaClasses c;
  c.class_of.assign(costs.dp, -1);
  for (int d = 0; d < costs.dp; ++d)
    if (touched.count(d) || std::find(chosen.begin(), chosen.end(), d) != chosen.end()) {
      c.class_of[d] = static_cast<int>(c.simulated.size());
      c.simulated.push_back(d);
      c.stands_for.push_back(1);
      if (!touched.count(d)) c.samples.push_back(c.class_of[d]);
    }
  // The other untouched replicas, dealt to the stand-ins in turn.
  int next = 0;
  for (int d = 0; d < costs.dp; ++d)
    if (c.class_of[d] < 0) {
      c.class_of[d] = c.samples[next++ % c.samples.size()];
      ++c.stands_for[static_cast<size_t>(c.class_of[d])];
    }
  if (p.jitter.active() && untouched > stand_ins) c.untouched = untouched;
  return c;
}

std::string describe_replicas(const ReplicaClasses& c) {
  const int dp = static_cast<int>(c.class_of.size()), k = static_cast<int>(c.simulated.size());
  if (k == 1) return "one of " + std::to_string(dp) + " identical data-parallel replicas simulated, --exact simulates all";
  std::string touched, text = std::to_string(k) + " of " + std::to_string(dp) + " data-parallel replicas simulated (";
  for (int j = 0; j < k; ++j)
    if (std::find(c.samples.begin(), c.samples.end(), j) == c.samples.end())
      touched += (touched.empty() ? "" : ", ") + std::to_string(c.simulated[static_cast<size_t>(j)]);
  if (!touched.empty()) text += "replica " + touched + " with its what-ifs";
  const int others = dp - (k - static_cast<int>(c.samples.size()));
  if (c.untouched > 0)
    text += (touched.empty() ? "" : "; ") + std::to_string(c.samples.size()) + " samples of the other " +
            std::to_string(others) + ", their latest arrival at each DP collective extrapolated";
  else if (c.samples.size() == 1)
    text += (touched.empty() ? "" : "; ") + std::string("replica ") + std::to_string(c.simulated[c.samples[0]]) +
            " for the other " + std::to_string(others);
  else if (!c.samples.empty())
    text += (touched.empty() ? "" : "; ") + std::to_string(c.samples.size()) + " for the other " + std::to_string(others);
  return text + "), --exact simulates all";
}

double expected_max_of_normals(int n) {
  static std::map<int, double> known;
  if (n <= 1) return 0;
  if (auto it = known.find(n); it != known.end()) return it->second;
  // E = integral of x n phi(x) Phi(x)^(n-1) dx, by the midpoint rule on [-12, 12].
  const int steps = 48000;
  const double lo = -12, h = 24.0 / steps;
  double sum = 0;
  for (int i = 0; i < steps; ++i) {
    const double x = lo + (i + 0.5) * h;
    const double phi = std::exp(-x * x / 2) / std::sqrt(2 * M_PI), Phi = 0.5 * std::erfc(-x / std::sqrt(2.0));
    sum += x * n * phi * std::pow(Phi, n - 1) * h;
  }
  return known[n] = sum;
}

ReplicaMeeting::ReplicaMeeting(const ReplicaClasses& classes)
    : classes_(classes),
      barrier_(sg4::Barrier::create(static_cast<unsigned>(classes.simulated.size()))),
      arrivals_(classes.simulated.size(), 0.0) {}

void ReplicaMeeting::arrive(int member) {
  if (arrivals_.size() <= 1) return;
  arrivals_[static_cast<size_t>(member)] = sg4::Engine::get_clock();
  barrier_->wait();
  // Every member has arrived (and none can arrive at the next collective before leave()).
  double start = *std::max_element(arrivals_.begin(), arrivals_.end());
  if (classes_.untouched > 0 && classes_.samples.size() >= 2) {
    double mean = 0, squares = 0;
    for (int s : classes_.samples) mean += arrivals_[static_cast<size_t>(s)];
    mean /= static_cast<double>(classes_.samples.size());
    for (int s : classes_.samples) squares += std::pow(arrivals_[static_cast<size_t>(s)] - mean, 2);
    const double sd = std::sqrt(squares / static_cast<double>(classes_.samples.size() - 1));
    start = std::max(start, mean + sd * expected_max_of_normals(classes_.untouched));
  }
  sg4::this_actor::sleep_until(start);
}

void ReplicaMeeting::leave() {
  if (arrivals_.size() > 1) barrier_->wait();
}

}  // namespace quintnet::sim
