// Viewer performance on large traces: loading a 1,000,000-event trace file (parse +
// timeline model) and repainting it (layout + QPainter into a 1600-pixel image) at
// three zoom levels.  Goals (issue: visualizer): load < 3 s, repaint < 30 ms.
// Baseline in the same process: the same work on a 10,000-event trace.
#include <benchmark/benchmark.h>

#include <QGuiApplication>
#include <QImage>
#include <QPainter>
#include <cstdio>
#include <filesystem>

#include "core/trace.h"
#include "visualizer/model/grouping.h"
#include "visualizer/model/scene.h"
#include "visualizer/model/teaching.h"
#include "visualizer/qt/offscreen.h"
#include "visualizer/qt/scene_painter.h"

namespace {

using namespace quintnet;

// A 1F1B-like pattern on `ranks` ranks: forward/backward pairs with p2p sends.
core::Trace synthetic_trace(long events, int ranks) {
  core::Trace t;
  t.source = "bench";
  for (int r = 0; r < ranks; ++r) t.ranks.push_back({0, 0, r});
  const long per_rank = events / ranks;
  for (int r = 0; r < ranks; ++r)
    for (long i = 0; i < per_rank; ++i) {
      core::TraceEvent e;
      const bool send = i % 3 == 2;
      e.kind = send ? "send" : (i % 3 == 0 ? "forward" : "backward");
      e.name = e.kind + std::to_string(i % 8);
      e.rank = r;
      e.lane = send ? core::Lane::P2P : core::Lane::Compute;
      e.ts_us = static_cast<double>(i) * 10.0 + r;
      e.dur_us = send ? 2.0 : 8.0;
      e.step = static_cast<int>(i / 3000);
      e.mb = static_cast<int>(i % 8);
      t.events.push_back(std::move(e));
    }
  return t;
}

std::string trace_file(long events) {
  const std::string path = "/tmp/quintnet_bench_" + std::to_string(events) + ".json";
  if (!std::filesystem::exists(path)) core::write_trace(synthetic_trace(events, 8), path);
  return path;
}

void BM_LoadTrace(benchmark::State& state) {
  const std::string path = trace_file(state.range(0));
  for (auto _ : state) {
    viz::Timeline tl(core::read_trace(path));
    benchmark::DoNotOptimize(tl.rows().size());
  }
  state.counters["events"] = static_cast<double>(state.range(0));
}
BENCHMARK(BM_LoadTrace)->Arg(10000)->Arg(1000000)->Unit(benchmark::kMillisecond)->Iterations(2);

// Repaint: layout + paint, zoomed to 1 / range(1) of the timeline.
void BM_Repaint(benchmark::State& state) {
  static std::map<long, std::unique_ptr<viz::Timeline>> cache;
  auto& tl = cache[state.range(0)];
  if (!tl) tl = std::make_unique<viz::Timeline>(synthetic_trace(state.range(0), 8));
  viz::ViewOptions view;
  view.width = 1600;
  const double span = (tl->end_us() - tl->begin_us()) / static_cast<double>(state.range(1));
  view.t0_us = tl->begin_us() + 0.4 * (tl->end_us() - tl->begin_us());
  view.t1_us = view.t0_us + span;
  QImage image(1600, 600, QImage::Format_RGB32);
  for (auto _ : state) {
    const viz::Scene s = viz::draw_timeline(*tl, view);
    QPainter p(&image);
    viz::paint_scene(p, s);
    benchmark::DoNotOptimize(s.boxes.size());
  }
}
BENCHMARK(BM_Repaint)
    ->Args({10000, 1})
    ->Args({1000000, 1})
    ->Args({1000000, 100})
    ->Args({1000000, 10000})
    ->Unit(benchmark::kMillisecond);

// A simulated-like step of a large mesh: the 1F1B schedule of 16 stages and 16
// microbatches (core's generator, with its sends and receives) on every rank of its
// stage, tp 8 × dp (ranks / 128), each rank shifted by up to 50 us so the groups have a
// spread.  16,384 ranks: 1.5 million events and 0.5 million messages.
double shift(int rank) { return static_cast<double>((static_cast<unsigned>(rank) * 2654435761u) % 1000u) * 0.05; }

core::Trace mesh_trace(int ranks) {
  viz::TeachingSchedule s;
  s.pp = 16;
  s.microbatches = 16;
  const core::Trace one = viz::teaching_trace(s);
  core::Trace t;
  t.source = "sim";
  const int per_stage = ranks / 16, tp = 8;
  t.ranks.resize(static_cast<size_t>(ranks));
  t.events.reserve(one.events.size() * static_cast<size_t>(per_stage));
  for (int stage = 0; stage < 16; ++stage)
    for (int m = 0; m < per_stage; ++m) {
      const int rank = stage * per_stage + m;
      t.ranks[static_cast<size_t>(rank)] = {m / tp, m % tp, stage};
      for (const core::TraceEvent& e : one.events) {
        if (e.rank != stage) continue;
        core::TraceEvent c = e;
        c.rank = rank;
        c.ts_us += shift(rank);
        t.events.push_back(std::move(c));
      }
    }
  // Member m of each stage sends to member m of the next.
  for (const core::TraceFlow& f : one.flows)
    for (int m = 0; m < per_stage; ++m) {
      core::TraceFlow c = f;
      c.id = t.flows.size() + 1;
      c.from_rank = f.from_rank * per_stage + m;
      c.to_rank = f.to_rank * per_stage + m;
      c.from_ts_us += shift(c.from_rank);
      c.to_ts_us += shift(c.to_rank);
      t.flows.push_back(c);
    }
  return t;
}

std::string mesh_file(int ranks) {
  const std::string path = "/tmp/quintnet_bench_mesh2_" + std::to_string(ranks) + ".json";
  if (!std::filesystem::exists(path)) core::write_trace(mesh_trace(ranks), path);
  return path;
}

// Opening a large simulated trace grouped per stage, as the viewer does above 256
// ranks: read the file, group, build the timeline.  Goal (issue: viewer): 16,384 ranks
// in <= 3 s.  Baseline in the same process: 1,024 ranks.
void BM_OpenGrouped(benchmark::State& state) {
  const std::string path = mesh_file(static_cast<int>(state.range(0)));
  size_t events = 0;
  for (auto _ : state) {
    const core::Trace t = core::read_trace(path);
    events = t.events.size();
    const viz::GroupedTrace g = viz::group_trace(t, viz::Grouping::parse("pp"));
    const auto tl = viz::grouped_timeline(g);
    benchmark::DoNotOptimize(tl->rows().size());
  }
  state.counters["ranks"] = static_cast<double>(state.range(0));
  state.counters["events"] = static_cast<double>(events);
}
BENCHMARK(BM_OpenGrouped)->Arg(1024)->Arg(16384)->Unit(benchmark::kMillisecond)->Iterations(2);

// Repainting the grouped view (layout + paint, whiskers included).  Goal: <= 16 ms.
void BM_RepaintGrouped(benchmark::State& state) {
  const viz::GroupedTrace g = viz::group_trace(mesh_trace(static_cast<int>(state.range(0))), viz::Grouping::parse("pp"));
  const auto tl = viz::grouped_timeline(g);
  viz::ViewOptions view;
  view.width = 1600;
  view.spread = std::make_shared<const std::vector<viz::Interval>>(g.spread);
  QImage image(1600, 900, QImage::Format_RGB32);
  for (auto _ : state) {
    const viz::Scene s = viz::draw_timeline(*tl, view);
    QPainter p(&image);
    viz::paint_scene(p, s);
    benchmark::DoNotOptimize(s.boxes.size());
  }
  state.counters["lanes"] = static_cast<double>(tl->rows().size());
}
BENCHMARK(BM_RepaintGrouped)->Arg(1024)->Arg(16384)->Unit(benchmark::kMillisecond);

}  // namespace

int main(int argc, char** argv) {
  quintnet::viz::use_offscreen_without_display();
  quintnet::viz::QtArguments qt("viz_bench");
  QGuiApplication app(qt.argc, qt.argv);
  benchmark::Initialize(&argc, argv);
  benchmark::RunSpecifiedBenchmarks();
  return 0;
}
