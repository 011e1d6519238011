// The schedule validator on damaged schedules: a generated schedule (kind, pp,
// microbatches and chunks from the first bytes) is edited by the rest — actions swapped,
// dropped, duplicated, or a field changed, a little out of range on purpose — and the
// validator must accept it or refuse it with core::ScheduleError, never crash or hang.
// Starting from a valid schedule keeps the inputs near the interesting boundary.
#include <cstdint>
#include <utility>

#include "core/error.h"
#include "core/schedule.h"
#include "core/schedule_generators.h"
#include "core/schedule_validator.h"

using namespace quintnet::core;

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, size_t size) {
  if (size < 4) return 0;
  const ScheduleKind kinds[] = {ScheduleKind::Afab, ScheduleKind::OneFOneB, ScheduleKind::Interleaved,
                                ScheduleKind::ZbH1};
  const ScheduleKind kind = kinds[data[0] % 4];
  const int pp = 1 + data[1] % 4, chunks = kind == ScheduleKind::Interleaved ? 2 : 1;
  const int m = (kind == ScheduleKind::Interleaved ? pp : 1) + data[2] % 4;
  Schedule s;
  try {
    s = make_schedule(kind, pp, m, chunks);
  } catch (const UserError&) {
    return 0;
  }
  // Four bytes an edit: what, which rank, which action, a value.
  for (size_t i = 3; i + 4 <= size; i += 4) {
    auto& actions = s.ranks[data[i + 1] % s.pp];
    if (actions.empty()) continue;
    const size_t at = data[i + 2] % actions.size();
    const int v = data[i + 3];
    Action& a = actions[at];
    switch (data[i] % 7) {
      case 0: std::swap(a, actions[v % actions.size()]); break;
      case 1: actions.erase(actions.begin() + static_cast<long>(at)); break;
      case 2: actions.insert(actions.begin() + static_cast<long>(at), a); break;
      case 3: a.kind = static_cast<ActionKind>(v % (static_cast<int>(ActionKind::OptimizerStep) + 1)); break;
      case 4: a.mb = v % (s.microbatches + 2) - 1; break;
      case 5: a.chunk = v % (s.chunks + 2) - 1; break;
      case 6: a.peer = v % (s.pp + 2) - 1; break;
    }
  }
  try {
    validate_schedule(s);
  } catch (const ScheduleError&) {
  }
  return 0;
}
