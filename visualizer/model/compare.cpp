#include "visualizer/model/compare.h"

#include <algorithm>
#include <cstdio>
#include <map>

#include "core/trace_analysis.h"

namespace quintnet::viz {
namespace {

std::map<std::string, double> time_per_kind(const Timeline& t) {
  std::map<std::string, double> out;
  for (const auto& e : t.trace().events) out[e.kind] += e.dur_us;
  return out;
}

std::string signed_duration(double us) { return (us >= 0 ? "+" : "-") + duration_text(std::abs(us)); }

}  // namespace

Comparison compare_timelines(const Timeline& a, const Timeline& b) {
  Comparison c;
  c.step_a_us = core::mean_step_time_us(a.trace());
  c.step_b_us = core::mean_step_time_us(b.trace());
  c.bubble_a = a.bubble_fraction();
  c.bubble_b = b.bubble_fraction();
  const auto ka = time_per_kind(a), kb = time_per_kind(b);
  std::vector<std::string> kinds = {"forward", "backward", "backward-input", "backward-weight", "send",
                                    "recv",    "allreduce", "grad-sync",     "optimizer"};
  for (const auto& m : {ka, kb})
    for (const auto& [k, v] : m)
      if (std::find(kinds.begin(), kinds.end(), k) == kinds.end()) kinds.push_back(k);
  for (const auto& k : kinds) {
    auto ia = ka.find(k), ib = kb.find(k);
    if (ia == ka.end() && ib == kb.end()) continue;
    c.kinds.push_back({k, ia == ka.end() ? 0.0 : ia->second, ib == kb.end() ? 0.0 : ib->second});
  }
  std::vector<int> ranks_a, ranks_b;
  for (const auto& r : a.rows())
    if (r.lane == core::Lane::Compute) ranks_a.push_back(r.rank);
  for (const auto& r : b.rows())
    if (r.lane == core::Lane::Compute) ranks_b.push_back(r.rank);
  std::sort(ranks_a.begin(), ranks_a.end());
  for (int r : ranks_a)
    if (std::find(ranks_b.begin(), ranks_b.end(), r) != ranks_b.end()) c.ranks.push_back({r, a.busy_us(r), b.busy_us(r)});
  return c;
}

Scene draw_comparison(const Timeline& a, const Timeline& b, const std::string& name_a, const std::string& name_b,
                      const ViewOptions& view) {
  const Comparison c = compare_timelines(a, b);
  const double span = std::max(a.end_us() - a.begin_us(), b.end_us() - b.begin_us());
  Scene s;
  s.width = view.width;
  s.background = view.palette.background;
  char line[256];
  std::snprintf(line, sizeof(line), "compare: step time %s vs %s (%s, %+.1f%%)   bubble %.1f%% vs %.1f%%",
                duration_text(c.step_a_us).c_str(), duration_text(c.step_b_us).c_str(),
                signed_duration(c.step_b_us - c.step_a_us).c_str(),
                c.step_a_us > 0 ? 100 * (c.step_b_us - c.step_a_us) / c.step_a_us : 0.0, 100 * c.bubble_a,
                100 * c.bubble_b);
  s.texts.push_back({12, 20, line, view.palette.text, 14, true});
  std::string kinds = "per kind (B - A):";
  for (const auto& k : c.kinds)
    if (k.b_us != k.a_us) kinds += "  " + k.kind + " " + signed_duration(k.b_us - k.a_us);
  s.texts.push_back({12, 38, kinds, view.palette.text, 11});
  const double header = 48;
  ViewOptions va = view, vb = view;
  va.t0_us = a.begin_us();
  va.t1_us = a.begin_us() + span;
  vb.t0_us = b.begin_us();
  vb.t1_us = b.begin_us() + span;
  va.title = "A: " + name_a;
  vb.title = "B: " + name_b;
  vb.critical_paths = view.critical_paths_b;
  const Scene sa = draw_timeline(a, va);
  Scene sb = draw_timeline(b, vb);
  for (Box& box : sb.boxes) box.source = 1;
  s.append(sa, header);
  s.append(sb, header + sa.height);
  return s;
}

}  // namespace quintnet::viz
