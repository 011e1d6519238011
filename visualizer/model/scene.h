#pragma once
// A drawing as plain data — boxes, lines, texts in pixels — made from a Timeline by
// draw_timeline() and painted by either back end (QPainter for PNG and the window,
// svg_writer for SVG).  Tests inspect it, and the pixels, without a display.
#include <memory>
#include <string>
#include <vector>

#include "visualizer/model/critical_path.h"
#include "visualizer/model/palette.h"
#include "visualizer/model/timeline.h"

namespace quintnet::viz {

struct Box {
  double x = 0, y = 0, w = 0, h = 0;
  Color fill;
  std::string label;  // drawn centred when it fits
  long event = -1;    // index into the trace's events (-1: a bubble or decoration)
  int source = 0;     // which timeline `event` indexes: 0, or 1 for compare mode's second
};
struct Line {
  double x1 = 0, y1 = 0, x2 = 0, y2 = 0;
  Color color;
  double width = 1;
  bool arrow = false;  // arrow head at (x2, y2)
};
struct Text {
  double x = 0, y = 0;  // baseline
  std::string text;
  Color color;
  double size = 12;
  bool bold = false;
  enum Align { Left, Center, Right } align = Left;
};

struct Scene {
  double width = 0, height = 0;
  Color background;
  std::vector<Box> boxes;  // painted in order: bands, bubbles, ops
  std::vector<Line> lines;
  std::vector<Text> texts;
  void append(const Scene& other, double dy);  // stacks `other` below, shifted by dy
};

struct ViewOptions {
  double width = 1600;
  Palette palette = Palette::light();
  // The time window shown; both NaN (default): the whole timeline.
  double t0_us = 0.0 / 0.0, t1_us = 0.0 / 0.0;
  bool flows = true;
  bool collectives = true;  // join each collective's group members
  std::string title;
  // Teaching mode's play: only events that start before this time are drawn (NaN: all).
  double reveal_until_us = 0.0 / 0.0;
  // Critical paths to draw over the ops (outlined, joined across ranks) and list under
  // the legend with their share per kind; none when null.  Compare mode: `_b` for the
  // second timeline.
  std::shared_ptr<const std::vector<CriticalPath>> critical_paths, critical_paths_b;
  // Grouped lanes (visualizer/model/grouping.h): per event, the earliest start and latest
  // end over the group's members, drawn as whiskers beside the median op; none when null.
  std::shared_ptr<const std::vector<Interval>> spread;
};

// Where things are: for tests, hit-testing and the interactive view.
struct Geometry {
  double plot_x0 = 0, plot_x1 = 0;  // time axis in pixels
  double t0_us = 0, t1_us = 0;
  double ruler_y = 0, rows_y = 0;
  double row_height = 0;
  std::vector<double> row_y;  // top of each timeline row
  double x_of(double t_us) const { return plot_x0 + (t_us - t0_us) / (t1_us - t0_us) * (plot_x1 - plot_x0); }
  double t_of(double x) const { return t0_us + (x - plot_x0) / (plot_x1 - plot_x0) * (t1_us - t0_us); }
  int row_at(double y) const;  // -1 outside
};

Geometry timeline_geometry(const Timeline& tl, const ViewOptions& view);
Scene draw_timeline(const Timeline& tl, const ViewOptions& view);

// Ruler ticks for a window: a step of 1, 2 or 5 x 10^k us giving ~`target` ticks,
// labelled in ns, us, ms or s as fits.
struct Tick {
  double t_us;
  std::string label;
};
std::vector<Tick> ruler_ticks(double t0_us, double t1_us, int target = 10);
std::string duration_text(double us);  // "850 us", "12.5 ms", "1.25 s"

}  // namespace quintnet::viz
