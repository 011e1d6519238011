#include "visualizer/model/scene.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>

#include "visualizer/model/collectives.h"

namespace quintnet::viz {
namespace {

constexpr double kLabelWidth = 190;  // lane labels and bubble %
constexpr double kMargin = 12;
constexpr double kTitleHeight = 30;
constexpr double kRulerHeight = 26;
constexpr double kComputeRow = 26;
constexpr double kSubRow = 14;
constexpr double kRankGap = 6;
constexpr double kLegendHeight = 30;

double row_height_of(const Row& r) { return r.lane == core::Lane::Compute ? kComputeRow : kSubRow; }

std::string percent(double f) {
  char s[16];
  std::snprintf(s, sizeof(s), "%.1f%%", 100 * f);
  return s;
}

// The op's short label: F3, B3, BI3, BW3, the event name otherwise.
std::string op_label(const core::TraceEvent& e) {
  if (e.mb < 0) return e.name;
  // Chunk c > 0 of an interleaved schedule gets c primes: F3 (chunk 0), F3' (chunk 1).
  const std::string id = std::to_string(e.mb) + std::string(static_cast<size_t>(std::clamp(e.chunk, 0, 3)), '\'');
  if (e.kind == "forward") return "F" + id;
  if (e.kind == "backward") return "B" + id;
  if (e.kind == "backward-input") return "BI" + id;
  if (e.kind == "backward-weight") return "BW" + id;
  return id;
}

}  // namespace

void Scene::append(const Scene& other, double dy) {
  for (Box b : other.boxes) boxes.push_back((b.y += dy, b));
  for (Line l : other.lines) lines.push_back((l.y1 += dy, l.y2 += dy, l));
  for (Text t : other.texts) texts.push_back((t.y += dy, t));
  width = std::max(width, other.width);
  height = std::max(height, other.height + dy);
}

int Geometry::row_at(double y) const {
  for (size_t i = 0; i < row_y.size(); ++i) {
    const double next = i + 1 < row_y.size() ? row_y[i + 1] : row_y[i] + row_height;
    if (y >= row_y[i] && y < next) return static_cast<int>(i);
  }
  return -1;
}

std::string duration_text(double us) {
  char s[32];
  const double a = std::abs(us);
  if (a >= 1e6) std::snprintf(s, sizeof(s), "%.3g s", us / 1e6);
  else if (a >= 1e3) std::snprintf(s, sizeof(s), "%.3g ms", us / 1e3);
  else if (a >= 1) std::snprintf(s, sizeof(s), "%.3g us", us);
  else std::snprintf(s, sizeof(s), "%.3g ns", us * 1e3);
  return s;
}

std::vector<Tick> ruler_ticks(double t0_us, double t1_us, int target) {
  std::vector<Tick> ticks;
  const double span = t1_us - t0_us;
  if (!(span > 0) || target < 1) return ticks;
  const double raw = span / target, mag = std::pow(10.0, std::floor(std::log10(raw)));
  double step = mag;
  for (double m : {1.0, 2.0, 5.0, 10.0})
    if (m * mag >= raw) {
      step = m * mag;
      break;
    }
  // Ticks from the window start, labelled relative to it: "0, 20 ms, 40 ms" for any window.
  for (int k = 0; t0_us + k * step <= t1_us + 1e-9 * span; ++k)
    ticks.push_back({t0_us + k * step, k == 0 ? "0" : duration_text(k * step)});
  return ticks;
}

Geometry timeline_geometry(const Timeline& tl, const ViewOptions& view) {
  Geometry g;
  g.plot_x0 = kLabelWidth;
  g.plot_x1 = std::max(g.plot_x0 + 50, view.width - kMargin);
  const bool fit = std::isnan(view.t0_us) || std::isnan(view.t1_us) || !(view.t1_us > view.t0_us);
  g.t0_us = fit ? tl.begin_us() : view.t0_us;
  g.t1_us = fit ? tl.end_us() : view.t1_us;
  if (!(g.t1_us > g.t0_us)) g.t1_us = g.t0_us + 1;
  g.ruler_y = kTitleHeight;
  g.rows_y = kTitleHeight + kRulerHeight;
  g.row_height = kComputeRow;
  double y = g.rows_y;
  int previous_rank = -1;
  for (const Row& r : tl.rows()) {
    if (previous_rank >= 0 && r.rank != previous_rank) y += kRankGap;
    g.row_y.push_back(y);
    y += row_height_of(r);
    previous_rank = r.rank;
  }
  return g;
}

namespace {

// What every part of a drawing reads, and the scene it adds to.
struct Drawing {
  const Timeline& tl;
  const ViewOptions& view;
  const Palette& pal;
  Geometry g;
  double rows_end;  // below the last row
  Scene& s;

  double clip_x(double x) const { return std::clamp(x, g.plot_x0, g.plot_x1); }
  // The row of (rank, lane) by index, for arrows and collectives.
  std::map<std::pair<int, core::Lane>, size_t> row_index() const {
    std::map<std::pair<int, core::Lane>, size_t> out;
    for (size_t i = 0; i < tl.rows().size(); ++i) out[{tl.rows()[i].rank, tl.rows()[i].lane}] = i;
    return out;
  }
};

// Title (what, the step time, the bubble), rank bands, then the ruler's grid (1-pixel
// boxes: under the ops, over the bands).
void draw_frame(Drawing& d) {
  const auto& rows = d.tl.rows();
  std::string title = d.view.title.empty() ? "trace (" + d.tl.trace().source + ")" : d.view.title;
  title += "   step time " + duration_text(d.tl.step_time_us()) + "   bubble " + percent(d.tl.bubble_fraction());
  d.s.texts.push_back({kMargin, 20, title, d.pal.text, 14, true});
  for (size_t i = 0; i < rows.size(); ++i)
    if (rows[i].lane == core::Lane::Compute)
      d.s.boxes.push_back({0, d.g.row_y[i], d.view.width, kComputeRow, d.pal.lane_band, "", -1});
  for (const Tick& t : ruler_ticks(d.g.t0_us, d.g.t1_us, static_cast<int>((d.g.plot_x1 - d.g.plot_x0) / 110))) {
    const double x = d.g.x_of(t.t_us);
    d.s.boxes.push_back({x, d.g.ruler_y + 16, 1, d.rows_end - d.g.ruler_y - 16, d.pal.grid, "", -1});
    d.s.texts.push_back({x, d.g.ruler_y + 13, t.label, d.pal.text, 10, false, Text::Center});
  }
}

// A compute row's label, its bubble share and its bubbles (idle gaps inside the step).
void draw_bubbles(Drawing& d, size_t i) {
  const Row& r = d.tl.rows()[i];
  const Geometry& g = d.g;
  const double y = g.row_y[i], h = row_height_of(r);
  d.s.texts.push_back({kMargin, y + 17, r.label, d.pal.text, 11, true});
  d.s.texts.push_back({g.plot_x0 - 8, y + 17, "bubble " + percent(d.tl.bubble_fraction(r.rank)), d.pal.text, 10, false,
                       Text::Right});
  // Bubbles narrower than half a pixel vanish under the ops' merged boxes anyway.
  const auto& bubbles = d.tl.bubbles(r.rank);
  auto first = std::lower_bound(bubbles.begin(), bubbles.end(), g.t0_us,
                                [](const Interval& b, double t) { return b.end_us < t; });
  for (auto b = first; b != bubbles.end() && b->begin_us <= g.t1_us; ++b) {
    const double end = std::isnan(d.view.reveal_until_us) ? b->end_us : std::min(b->end_us, d.view.reveal_until_us);
    const double x0 = d.clip_x(g.x_of(b->begin_us)), x1 = d.clip_x(g.x_of(end));
    if (b->begin_us >= end) continue;
    if (x1 - x0 < 0.5) {
      // Skip the tiny bubbles of this pixel column, but look at the last one that
      // starts in it: it may reach into the next columns.
      const double next_column = g.t_of(std::floor(x1) + 1.0);
      auto next = std::lower_bound(b + 1, bubbles.end(), next_column,
                                   [](const Interval& i, double t) { return i.begin_us < t; });
      if (next - 1 != b) b = next - 2;  // the loop's ++b lands on next - 1
      continue;
    }
    d.s.boxes.push_back({x0, y + 2, x1 - x0, h - 4, d.pal.bubble, "", -1});
  }
}

// Grouped lanes: a whisker along the row's bottom edge from the members' earliest start
// to their latest end of each op (the lines are painted over the boxes).
void draw_spread(Drawing& d, size_t i) {
  const auto& spread = *d.view.spread;
  const Row& r = d.tl.rows()[i];
  const auto [lo, hi] = d.tl.visible(i, d.g.t0_us, d.g.t1_us);
  if (hi - lo > 20000) return;  // too many to tell apart: the ops alone
  const double y = d.g.row_y[i] + row_height_of(r) - 1;
  for (size_t k = lo; k < hi; ++k) {
    const size_t e = r.events[k];
    if (e >= spread.size()) continue;
    const double x0 = d.clip_x(d.g.x_of(spread[e].begin_us)), x1 = d.clip_x(d.g.x_of(spread[e].end_us));
    if (x1 - x0 < 1) continue;
    d.s.lines.push_back({x0, y, x1, y, d.pal.text, 1});
    d.s.lines.push_back({x0, y - 4, x0, y, d.pal.text, 1});
    d.s.lines.push_back({x1, y - 4, x1, y, d.pal.text, 1});
  }
}

// A row's ops.  Level of detail: ops narrower than a pixel that touch the previous box
// are merged into it, so a million events become at most a few boxes per pixel column.
// When every op of the row is narrower than a pixel, whole pixel columns are skipped by
// binary search after the first op in them: the cost follows the image's width, not the
// event count.
void draw_ops(Drawing& d, size_t i) {
  const Row& r = d.tl.rows()[i];
  const Geometry& g = d.g;
  const auto& events = d.tl.trace().events;
  const double y = g.row_y[i], h = row_height_of(r);
  const bool compute = r.lane == core::Lane::Compute;
  const auto [lo, hi] = d.tl.visible(i, g.t0_us, g.t1_us);
  const bool dense = g.x_of(g.t0_us + d.tl.longest_us(i)) - g.plot_x0 < 1.0;
  Box* last = nullptr;
  for (size_t k = lo; k < hi; ++k) {
    if (dense && last && k > lo) {
      const double next_column = g.t_of(std::floor(last->x + last->w) + 1.0);
      const size_t jump = d.tl.first_starting_at(i, k, next_column);
      if (jump > k) {
        last->w = std::max(last->w, std::floor(last->x + last->w) + 1.0 - last->x);  // the skipped ops' column
        last->label.clear();
        k = jump;
        if (k >= hi) break;
      }
    }
    const long idx = static_cast<long>(r.events[k]);
    const core::TraceEvent& e = events[static_cast<size_t>(idx)];
    if (e.end_us() < g.t0_us || e.ts_us > g.t1_us || e.ts_us > d.view.reveal_until_us) continue;
    const double x0 = d.clip_x(g.x_of(e.ts_us)), x1 = d.clip_x(g.x_of(e.end_us()));
    if (last && x1 - x0 < 1.0 && x0 <= last->x + last->w + 1.0) {
      last->w = std::max(last->w, x1 - last->x);
      if (last->event != idx && last->w < 2.0) last->label.clear();  // a run of tiny ops: no one label
      continue;
    }
    d.s.boxes.push_back(
        {x0, y + 2, std::max(x1 - x0, 0.5), h - 4, d.pal.of_op(e.kind, e.mb), compute ? op_label(e) : "", idx});
    last = &d.s.boxes.back();
  }
}

// Flow arrows: each send to its receive, between the ranks' p2p rows (or compute rows).
void draw_flows(Drawing& d) {
  const auto& rows = d.tl.rows();
  const auto row_of = d.row_index();
  auto row_center = [&](int rank, core::Lane lane) -> double {
    auto it = row_of.find({rank, lane});
    if (it == row_of.end()) it = row_of.find({rank, core::Lane::Compute});
    return it == row_of.end() ? -1 : d.g.row_y[it->second] + row_height_of(rows[it->second]) / 2;
  };
  for (const auto& f : d.tl.trace().flows) {
    if (f.to_ts_us < d.g.t0_us || f.from_ts_us > d.g.t1_us || f.to_ts_us > d.view.reveal_until_us) continue;
    const double y1 = row_center(f.from_rank, f.from_lane), y2 = row_center(f.to_rank, f.to_lane);
    if (y1 < 0 || y2 < 0) continue;
    d.s.lines.push_back({d.clip_x(d.g.x_of(f.from_ts_us)), y1, d.clip_x(d.g.x_of(f.to_ts_us)), y2, d.pal.flow, 1, true});
  }
}

// Collectives: each group's members joined at the last arrival (when there are few
// enough in the window to tell apart; otherwise the lanes alone say it).
void draw_collectives(Drawing& d) {
  const auto& rows = d.tl.rows();
  const auto row_of = d.row_index();
  std::vector<CollectiveSpan> spans;
  for (const CollectiveSpan& c : collective_spans(d.tl))
    if (c.last_arrival_us >= d.g.t0_us && c.last_arrival_us <= d.g.t1_us && !(c.last_arrival_us > d.view.reveal_until_us))
      spans.push_back(c);
  if (spans.size() > 4000) return;
  for (const CollectiveSpan& c : spans) {
    double top = 1e300, bottom = -1e300;
    for (int r : c.ranks) {
      auto it = row_of.find({r, c.lane});
      if (it == row_of.end()) continue;
      top = std::min(top, d.g.row_y[it->second] + 2);
      bottom = std::max(bottom, d.g.row_y[it->second] + row_height_of(rows[it->second]) - 2);
    }
    if (bottom > top) {
      const double x = d.g.x_of(c.last_arrival_us);
      d.s.lines.push_back({x, top, x, bottom, d.pal.of_kind("allreduce"), 1.5, false});
    }
  }
}

// Critical paths: each op on the path outlined, a line where the path moves to another
// rank or lane, idle stretches as a thin line, and the shares per kind under the legend.
void draw_critical_paths(Drawing& d) {
  const auto& rows = d.tl.rows();
  const auto row_of = d.row_index();
  const Color c = d.pal.critical;
  double text_y = d.s.height;
  for (const CriticalPath& path : *d.view.critical_paths) {
    double prev_x = -1, prev_y = -1;
    for (const PathSegment& seg : path.segments) {
      core::Lane lane = core::Lane::Compute;
      if (seg.event >= 0) lane = d.tl.trace().events[static_cast<size_t>(seg.event)].lane;
      const auto it = row_of.find({seg.rank, lane});
      if (it == row_of.end()) continue;
      const double y0 = d.g.row_y[it->second] + 1, y1 = y0 + row_height_of(rows[it->second]) - 2;
      const double mid = (y0 + y1) / 2;
      const double x0 = d.clip_x(d.g.x_of(seg.begin_us)), x1 = d.clip_x(d.g.x_of(seg.end_us));
      const bool shown = seg.end_us >= d.g.t0_us && seg.begin_us <= d.g.t1_us;
      if (prev_x >= 0 && std::abs(prev_y - mid) > 0.5 && shown) d.s.lines.push_back({prev_x, prev_y, x0, mid, c, 2});
      if (shown && seg.event < 0) {
        d.s.lines.push_back({x0, mid, x1, mid, c, 2});
      } else if (shown) {
        d.s.lines.push_back({x0, y0, x1, y0, c, 2});
        d.s.lines.push_back({x1, y0, x1, y1, c, 2});
        d.s.lines.push_back({x1, y1, x0, y1, c, 2});
        d.s.lines.push_back({x0, y1, x0, y0, c, 2});
      }
      prev_x = x1, prev_y = mid;
    }
    d.s.texts.push_back({kMargin, text_y, "step " + std::to_string(path.step) + "  " + critical_path_summary(path), c, 11, true});
    text_y += 16;
  }
  d.s.height = text_y;
}

// The kinds the trace has, and the bubble.
void draw_legend(Drawing& d) {
  double x = kMargin;
  const double ly = d.rows_end + 12;
  std::vector<std::pair<std::string, Color>> legend;
  const auto& kinds = d.tl.kinds();
  for (const char* kind : {"forward", "backward", "backward-input", "backward-weight", "send", "recv", "allreduce",
                           "grad-sync", "optimizer", "cp-ring"})
    if (std::find(kinds.begin(), kinds.end(), kind) != kinds.end()) legend.push_back({kind, d.pal.of_kind(kind)});
  legend.push_back({"bubble (idle inside the step)", d.pal.bubble});
  for (const auto& [name, color] : legend) {
    d.s.boxes.push_back({x, ly, 12, 12, color, "", -1});
    d.s.texts.push_back({x + 16, ly + 10, name, d.pal.text, 10});
    x += 28 + 6.5 * static_cast<double>(name.size());
  }
}

}  // namespace

Scene draw_timeline(const Timeline& tl, const ViewOptions& view) {
  const Geometry g = timeline_geometry(tl, view);
  const auto& rows = tl.rows();
  Scene s;
  s.width = view.width;
  s.background = view.palette.background;
  const double rows_end = rows.empty() ? g.rows_y : g.row_y.back() + row_height_of(rows.back());
  s.height = rows_end + kLegendHeight + kMargin;
  Drawing d{tl, view, view.palette, g, rows_end, s};
  draw_frame(d);
  for (size_t i = 0; i < rows.size(); ++i) {
    if (rows[i].lane == core::Lane::Compute)
      draw_bubbles(d, i);
    else
      s.texts.push_back({g.plot_x0 - 8, g.row_y[i] + 11, rows[i].label, view.palette.text, 9, false, Text::Right});
    if (view.spread) draw_spread(d, i);
    draw_ops(d, i);
  }
  if (view.flows) draw_flows(d);
  if (view.collectives) draw_collectives(d);
  draw_legend(d);
  if (view.critical_paths) draw_critical_paths(d);
  return s;
}

}  // namespace quintnet::viz
