#include "visualizer/qt/sources.h"

#include <map>

#include "core/trace_analysis.h"
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
    const std::string name = t.schedule + "  pp=" + std::to_string(t.pp) + "  microbatches=" +
                             std::to_string(t.microbatches) +
                             (t.chunks > 1 ? "  chunks=" + std::to_string(t.chunks) : "");
    if (s.view.title.empty()) s.view.title = name;
    s.a = std::make_unique<Timeline>(teaching_trace(t));
    s.names = {name};
    s.legend = phase_legend(t.schedule);
    return s;
  }
  if (traces.empty() || traces.size() > 2) throw UsageError("expected a trace file, two to compare, or --schedule NAME");
  if (traces.size() == 1) {
    if (args.value("compare-step")) throw UsageError("--compare-step needs a second trace (--compare TRACE)");
    s.a = std::make_unique<Timeline>(core::read_trace(traces[0]), step);
    s.names = traces;
  } else {
    // One step of each, never a span of several against one: by default a typical step
    // of the first (a measured run's median) against the first step of the second (a
    // simulation has one).
    core::Trace a = core::read_trace(traces[0]), b = core::read_trace(traces[1]);
    const int step_a = step ? *step : core::median_step(a);
    const int step_b = args.value("compare-step") ? args.get_int("compare-step", 0, 0, 1 << 30) : first_step(b);
    s.a = std::make_unique<Timeline>(std::move(a), step_a);
    s.b = std::make_unique<Timeline>(std::move(b), step_b);
    s.names = {traces[0] + " (step " + std::to_string(step_a) + ")", traces[1] + " (step " + std::to_string(step_b) + ")"};
  }
  if (s.view.title.empty() && !s.b) s.view.title = traces[0] + " (" + s.a->trace().source + ")";
  return s;
}

}  // namespace quintnet::viz
