#include "core/schedule_ascii.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <sstream>

namespace quintnet::core {
namespace {

char letter(const Action& a) {
  char c = '?';
  switch (a.kind) {
    case ActionKind::Forward: c = 'F'; break;
    case ActionKind::Backward: c = 'B'; break;
    case ActionKind::BackwardInput: c = 'I'; break;
    case ActionKind::BackwardWeight: c = 'W'; break;
    default: break;
  }
  return a.chunk % 2 ? static_cast<char>(std::tolower(c)) : c;
}

const char* ansi(char l) {
  switch (std::toupper(static_cast<unsigned char>(l))) {
    case 'F': return "\033[30;46m";  // cyan
    case 'B': return "\033[30;42m";  // green
    case 'I': return "\033[30;43m";  // yellow
    case 'W': return "\033[30;45m";  // magenta
  }
  return "\033[0m";
}

int digits(int n) { return n < 10 ? 1 : 1 + digits(n / 10); }

}  // namespace

std::string render_ascii_timeline(const Schedule& s, const ScheduleStats& stats, bool color) {
  double unit = 0;
  for (const auto& rank : stats.timeline)
    for (const auto& ta : rank)
      if (is_compute(ta.action.kind) && ta.end > ta.start && (unit == 0 || ta.end - ta.start < unit))
        unit = ta.end - ta.start;
  if (unit == 0) unit = 1;
  const int width = 1 + digits(std::max(0, s.microbatches - 1));
  const int cells = static_cast<int>(std::ceil(stats.step_time / unit - 1e-9));
  const int max_cells = 2000;  // keep huge schedules printable

  std::ostringstream out;
  const std::string label_pad(std::string("rank ").size() + digits(std::max(1, s.pp - 1)) + 1, ' ');
  // Ruler: a tick every 10 cells, labelled with the time there.
  out << label_pad << ' ';
  for (int c = 0; c < std::min(cells, max_cells); c += 10) {
    std::ostringstream t;
    t << '|' << c * unit;
    std::string tick = t.str();
    tick.resize(static_cast<size_t>(10 * width), ' ');
    out << tick;
  }
  out << '\n';

  for (int r = 0; r < s.pp; ++r) {
    std::vector<char> row(static_cast<size_t>(std::min(cells, max_cells) * width), '.');
    std::vector<char> kind(row.size(), 0);
    for (const auto& ta : stats.timeline[r]) {
      if (!is_compute(ta.action.kind) || ta.end <= ta.start) continue;
      const int c0 = static_cast<int>(std::lround(ta.start / unit));
      const int c1 = std::max(c0 + 1, static_cast<int>(std::lround(ta.end / unit)));
      std::string label = std::string(1, letter(ta.action)) + std::to_string(ta.action.mb);
      label.resize(static_cast<size_t>(width), ' ');
      for (int c = c0; c < c1 && c < max_cells; ++c)
        for (int k = 0; k < width; ++k) {
          const size_t i = static_cast<size_t>(c * width + k);
          row[i] = c == c0 ? label[k] : '=';
          kind[i] = letter(ta.action);
        }
    }
    std::string name = "rank " + std::to_string(r);
    name.resize(label_pad.size(), ' ');
    out << name << '|';
    char current = 0;
    for (size_t i = 0; i < row.size(); ++i) {
      if (color && kind[i] != current) {
        out << (kind[i] ? ansi(kind[i]) : "\033[0m");
        current = kind[i];
      }
      out << row[i];
    }
    if (color) out << "\033[0m";
    if (cells > max_cells) out << " ...";
    out << '\n';
  }
  return out.str();
}

}  // namespace quintnet::core
