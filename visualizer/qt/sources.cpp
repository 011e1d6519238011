#include "visualizer/qt/sources.h"

#include <map>

#include "core/trace_analysis.h"
#include "visualizer/model/grouping.h"
#include "visualizer/model/teaching.h"

namespace quintnet::viz {

using core::cli::UsageError;

const std::vector<core::cli::OptionSpec> kSourceOptions = {
    {"step", "N", "only step N of the trace [all steps; comparing two traces: the first's median step]"},
    {"compare-step", "M", "comparing two traces: step M of the second [its first step]"},
    {"width", "PIXELS", "image width [1600]"},
    {"palette", "NAME", "light or dark [light]"},
    {"title", "TEXT", "title above the timeline [the trace's file and source]"},
    {"no-flows", "", "no arrows from sends to receives"},
    {"group-by", "AXES", "one lane per value of these mesh axes (pp, pp,dp, node; none), the rest collapsed to "
                         "min/median/max [pp above 256 ranks]"},
    {"critical-path", "", "draw each step's critical path (the ops and messages that set its time) and its share per kind"},
    {"schedule", "NAME", "teaching mode: draw this schedule (afab, 1f1b, interleaved, zb-h1) instead of a trace"},
    {"pp", "P", "teaching mode: pipeline ranks [4]"},
    {"microbatches", "M", "teaching mode: microbatches [8]"},
    {"chunks", "V", "teaching mode: chunks per rank (interleaved) [2 for interleaved, else 1]"},
    {"costs", "TF,TB[,TW]", "teaching mode: forward, backward(-input), weight-grad costs [1,2,0; zb-h1 1,1,1]"},
};

namespace {

int first_step(const core::Trace& t) {
  const std::map<int, double> spans = core::step_spans_us(t);
  if (spans.empty()) throw core::TraceError("the trace has no events, so no step to compare");
  return spans.begin()->first;
}

}  // namespace

Sources trace_sources(core::Trace trace, const std::string& name, const std::string& group_by, std::optional<int> step) {
  Sources s;
  s.names = {name};
  s.view.title = name + " (" + trace.source + ")";
  const Grouping g = Grouping::parse(group_by.empty() ? (trace.num_ranks() > kGroupAboveRanks ? "pp" : "none") : group_by,
                                     gpus_per_node(trace));
  if (g.empty()) {
    s.a = std::make_unique<Timeline>(std::move(trace), step);
    return s;
  }
  const int ranks = trace.num_ranks();
  if (step) trace = Timeline(std::move(trace), step).trace();  // the step's events only (checked)
  GroupedTrace grouped = group_trace(trace, g);
  s.a = grouped_timeline(grouped);
  s.view.spread = std::make_shared<const std::vector<Interval>>(std::move(grouped.spread));
  std::string axes;
  for (const std::string& a : g.axes) axes += (axes.empty() ? "" : ",") + a;
  s.view.title += "  " + std::to_string(ranks) + " ranks grouped by " + axes + " (median op, whiskers: earliest start to latest end)";
  return s;
}

Sources teaching_sources(const TeachingSchedule& t) {
  const std::string name = t.schedule + "  pp=" + std::to_string(t.pp) + "  microbatches=" + std::to_string(t.microbatches) +
                           (t.chunks > 1 ? "  chunks=" + std::to_string(t.chunks) : "");
  Sources s;
  s.view.title = name;
  s.a = std::make_unique<Timeline>(teaching_trace(t));
  s.names = {name};
  s.legend = phase_legend(t.schedule);
  return s;
}

Sources compare_sources(const std::string& trace_a, const std::string& trace_b, std::optional<int> step_a,
                        std::optional<int> step_b) {
  // One step of each, never a span of several against one: by default a typical step
  // of the first (a measured run's median) against the first step of the second (a
  // simulation has one).
  core::Trace a = core::read_trace(trace_a), b = core::read_trace(trace_b);
  const int sa = step_a ? *step_a : core::median_step(a);
  const int sb = step_b ? *step_b : first_step(b);
  Sources s;
  s.a = std::make_unique<Timeline>(std::move(a), sa);
  s.b = std::make_unique<Timeline>(std::move(b), sb);
  s.names = {trace_a + " (step " + std::to_string(sa) + ")", trace_b + " (step " + std::to_string(sb) + ")"};
  return s;
}

Sources load_sources(const core::cli::Args& args, const std::vector<std::string>& traces) {
  Sources s;
  s.view.width = args.get_int("width", 1600, 400, 20000);
  s.view.palette = Palette::named(args.get("palette", "light"));
  s.view.flows = !args.flag("no-flows");
  s.view.title = args.get("title", "");
  std::optional<int> step;
  if (args.value("step")) step = args.get_int("step", 0, 0, 1 << 30);

  if (args.value("schedule")) {
    if (!traces.empty()) throw UsageError("--schedule draws a schedule; give no trace file with it");
    TeachingSchedule t;
    t.schedule = args.get("schedule", "1f1b");
    t.pp = args.get_int("pp", 4, 1, 256);
    t.microbatches = args.get_int("microbatches", 8, 1, 4096);
    t.chunks = args.get_int("chunks", t.schedule == "interleaved" ? 2 : 1, 1, 64);
    if (t.schedule == "zb-h1") t.backward_input = 1, t.backward_weight = 1;
    if (auto c = args.get_doubles("costs", 2, 3); !c.empty()) {
      t.forward = c[0];
      t.backward_input = c[1];
      t.backward_weight = c.size() > 2 ? c[2] : 0.0;
    }
    Sources taught = teaching_sources(t);
    s.a = std::move(taught.a);
    s.names = std::move(taught.names);
    s.legend = std::move(taught.legend);
    if (s.view.title.empty()) s.view.title = s.names[0];
    if (args.flag("critical-path")) s.view.critical_paths = critical_paths(*s.a);
    return s;
  }
  if (traces.empty() || traces.size() > 2) throw UsageError("expected a trace file, two to compare, or --schedule NAME");
  if (traces.size() == 1) {
    if (args.value("compare-step")) throw UsageError("--compare-step needs a second trace (--compare TRACE)");
    Sources one = trace_sources(core::read_trace(traces[0]), traces[0], args.get("group-by", ""), step);
    s.a = std::move(one.a);
    s.view.spread = std::move(one.view.spread);
    s.names = traces;
    if (s.view.title.empty()) s.view.title = one.view.title;
  } else {
    if (args.value("group-by")) throw UsageError("--group-by draws one trace; compare two without it");
    Sources c = compare_sources(traces[0], traces[1], step,
                                args.value("compare-step") ? std::optional<int>(args.get_int("compare-step", 0, 0, 1 << 30))
                                                           : std::nullopt);
    s.a = std::move(c.a);
    s.b = std::move(c.b);
    s.names = std::move(c.names);
  }
  if (args.flag("critical-path")) {
    s.view.critical_paths = critical_paths(*s.a);
    if (s.b) s.view.critical_paths_b = critical_paths(*s.b);
  }
  return s;
}

}  // namespace quintnet::viz
