#include <pybind11/stl.h>

#include <algorithm>
#include <optional>
#include <tuple>

#include "bindings.h"
#include "core/error.h"
#include "core/atomic_file.h"
#include "core/trace.h"
#include "core/trace_analysis.h"
#include "json_bridge.h"
#include "visualizer/model/scene.h"
#include "visualizer/model/svg_writer.h"
#include "visualizer/model/timeline.h"
#ifdef QN_WITH_QT
#include "visualizer/qt/png_writer.h"
#endif

namespace py = pybind11;

namespace quintnet::python {
namespace {

core::Lane lane_named(const std::string& name, size_t index) {
  for (int l = 0; l < core::kNumLanes; ++l)
    if (name == core::lane_name(static_cast<core::Lane>(l))) return static_cast<core::Lane>(l);
  throw core::TraceError("events[" + std::to_string(index) + "].lane: '" + name +
                         "' is not a lane (compute, p2p, tp-collective, dp-collective)");
}

py::dict event_dict(const core::TraceEvent& e) {
  py::dict d;
  d["name"] = e.name;
  d["kind"] = e.kind;
  d["rank"] = e.rank;
  d["lane"] = core::lane_name(e.lane);
  d["ts_us"] = e.ts_us;
  d["dur_us"] = e.dur_us;
  d["step"] = e.step;
  d["mb"] = e.mb;
  d["chunk"] = e.chunk;
  d["bytes"] = e.bytes;
  d["peer"] = e.peer;
  return d;
}

template <typename T>
T field(const py::dict& d, const char* key, size_t index, std::optional<T> fallback = std::nullopt) {
  if (!d.contains(key)) {
    if (fallback) return *fallback;
    throw core::TraceError("events[" + std::to_string(index) + "]: no '" + key + "'");
  }
  try {
    return d[key].cast<T>();
  } catch (const py::cast_error&) {
    throw core::TraceError("events[" + std::to_string(index) + "]." + key + ": " +
                           py::repr(d[key]).cast<std::string>() + " has the wrong type");
  }
}

core::TraceEvent event_from(const py::handle& h, size_t i) {
  if (!py::isinstance<py::dict>(h)) throw core::TraceError("events[" + std::to_string(i) + "]: expected a dict");
  const py::dict d = h.cast<py::dict>();
  core::TraceEvent e;
  e.name = field<std::string>(d, "name", i);
  e.kind = field<std::string>(d, "kind", i);
  e.rank = field<int>(d, "rank", i);
  e.lane = lane_named(field<std::string>(d, "lane", i, std::string("compute")), i);
  e.ts_us = field<double>(d, "ts_us", i);
  e.dur_us = field<double>(d, "dur_us", i);
  e.step = field<int>(d, "step", i, 0);
  e.mb = field<int>(d, "mb", i, -1);
  e.chunk = field<int>(d, "chunk", i, -1);
  e.bytes = field<std::int64_t>(d, "bytes", i, 0);
  e.peer = field<int>(d, "peer", i, -1);
  return e;
}

// A trace built from Python, checked as a trace file is when read: what write() puts on
// disk reads back with read_trace and opens in the viewer.
core::Trace make_trace(const std::string& source, const py::iterable& events, std::optional<py::list> ranks,
                       const py::object& plan, const py::object& platform, const py::object& summary) {
  core::Trace t;
  t.source = source;
  size_t i = 0;
  int max_rank = -1;
  for (const py::handle& h : events) {
    t.events.push_back(event_from(h, i++));
    max_rank = std::max(max_rank, t.events.back().rank);
  }
  if (ranks) {
    for (const py::handle& r : *ranks) {
      const auto c = r.cast<std::tuple<int, int, int>>();
      t.ranks.push_back({std::get<0>(c), std::get<1>(c), std::get<2>(c)});
    }
  } else {
    for (int r = 0; r <= max_rank; ++r) t.ranks.push_back({0, 0, r});  // a pipeline of max_rank + 1 stages
  }
  if (!plan.is_none()) t.plan = to_json(plan);
  if (!platform.is_none()) t.platform = to_json(platform);
  if (!summary.is_none()) t.summary = to_json(summary);
  return core::trace_from_json(core::trace_to_json(t), "<python trace>");
}

viz::ViewOptions view_options(const core::Trace& t, double width, const std::string& title) {
  viz::ViewOptions view;
  view.width = width;
  view.title = title.empty() ? "(" + t.source + ")" : title;
  return view;
}

}  // namespace

void bind_trace(py::module_& m) {
  py::class_<core::Trace>(m, "Trace", "A timeline of ops per rank: measured (exec), simulated (sim) or symbolic (schedule)")
      .def(py::init(&make_trace), py::arg("source"), py::arg("events"), py::arg("ranks") = py::none(),
           py::arg("plan") = py::none(), py::arg("platform") = py::none(), py::arg("summary") = py::none(),
           "events: dicts with name, kind, rank, ts_us, dur_us [lane, step, mb, chunk, bytes, peer]; "
           "ranks: (dp, tp, pp) per global rank (default: a pipeline, rank r at pp r)")
      .def_readonly("source", &core::Trace::source)
      .def_property_readonly("plan", [](const core::Trace& t) { return from_json(t.plan); })
      .def_property_readonly("platform", [](const core::Trace& t) { return from_json(t.platform); })
      .def_property_readonly("summary", [](const core::Trace& t) { return from_json(t.summary); })
      .def_property_readonly("ranks",
                             [](const core::Trace& t) {
                               std::vector<std::tuple<int, int, int>> out;
                               for (const auto& r : t.ranks) out.emplace_back(r.dp, r.tp, r.pp);
                               return out;
                             },
                             "(dp, tp, pp) mesh coordinates per global rank")
      .def_property_readonly("events",
                             [](const core::Trace& t) {
                               py::list out;
                               for (const auto& e : t.events) out.append(event_dict(e));
                               return out;
                             },
                             "every event as a dict (quintnet.trace_arrays gives numpy columns)")
      .def("__len__", [](const core::Trace& t) { return t.events.size(); })
      .def("bubble_fraction", [](const core::Trace& t) { return core::measured_bubble_fraction(t); },
           "idle share of the compute lanes inside the step windows (as `quintnet bubble` measures it)")
      .def("mean_step_time_us", &core::mean_step_time_us)
      .def(
          "write", [](const core::Trace& t, const std::string& path) { core::write_trace(t, path); }, py::arg("path"),
          "write as a Chrome/Perfetto JSON trace that quintnet view and render open")
      .def(
          "render_svg",
          [](const core::Trace& t, const std::string& path, std::optional<int> step, double width, const std::string& title) {
            core::write_file_atomically(
                path, viz::scene_to_svg(viz::draw_timeline(viz::Timeline(t, step), view_options(t, width, title))));
          },
          py::arg("path"), py::arg("step") = py::none(), py::arg("width") = 1600.0, py::arg("title") = "",
          "draw the timeline (one step, or all) as `quintnet render -o F.svg` does")
      .def(
          "render_png",
          [](const core::Trace& t, const std::string& path, std::optional<int> step, double width, const std::string& title) {
#ifdef QN_WITH_QT
            viz::ensure_gui_application("quintnet-python");
            viz::write_png(viz::draw_timeline(viz::Timeline(t, step), view_options(t, width, title)), path);
#else
            (void)t, (void)path, (void)step, (void)width, (void)title;
            throw core::UserError("PNG needs the Qt viewer, which this build does not have; use render_svg");
#endif
          },
          py::arg("path"), py::arg("step") = py::none(), py::arg("width") = 1600.0, py::arg("title") = "",
          "draw the timeline as `quintnet render -o F.png` does (Qt; offscreen without a display)")
      .def("__repr__", [](const core::Trace& t) {
        return "<quintnet.Trace " + t.source + ", " + std::to_string(t.num_ranks()) + " ranks, " +
               std::to_string(t.events.size()) + " events>";
      });

#ifdef QN_WITH_QT
  m.attr("HAVE_PNG") = true;
#else
  m.attr("HAVE_PNG") = false;
#endif
  m.def("read_trace", &core::read_trace, py::arg("path"),
        "Read a trace file (quintnet-train --trace, quintnet simulate --trace, quintnet schedule --trace)");
}

}  // namespace quintnet::python
