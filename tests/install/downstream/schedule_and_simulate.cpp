// QuintNet::core and QuintNet::sim from an installed prefix: the 1F1B bubble of pp 4,
// 8 microbatches (closed form (p-1)/(m+p-1) = 3/11) and its simulated step on the ideal
// platform ((m+p-1)(tf+tb)).  Exits 1 when either differs.
#include <cmath>
#include <cstdio>

#include "core/schedule_generators.h"
#include "core/schedule_validator.h"
#include "sim/platform.h"
#include "sim/simulation.h"

using namespace quintnet;

int main() {
  const core::ScheduleStats stats = core::simulate_schedule(core::make_1f1b(4, 8));
  const double tf = 0.7, tb = 1.9;
  const sim::SimResult result = sim::simulate_step(
      sim::uniform_step_costs(core::ScheduleKind::OneFOneB, 4, 8, 1, tf, tb, 0.0), sim::load_platform("ideal"));
  std::printf("1f1b pp 4 m 8: bubble %.6f (3/11 = %.6f), simulated step %.6f s (expected %.6f)\n",
              stats.bubble_fraction, 3.0 / 11, result.step_time_s, 11 * (tf + tb));
  const bool ok = std::fabs(stats.bubble_fraction - 3.0 / 11) < 1e-12 &&
                  std::fabs(result.step_time_s - 11 * (tf + tb)) < 1e-6 * 11 * (tf + tb);
  return ok ? 0 : 1;
}
