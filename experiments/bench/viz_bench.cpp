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
#include "visualizer/model/scene.h"
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

}  // namespace

int main(int argc, char** argv) {
  quintnet::viz::use_offscreen_without_display();
  quintnet::viz::QtArguments qt("viz_bench");
  QGuiApplication app(qt.argc, qt.argv);
  benchmark::Initialize(&argc, argv);
  benchmark::RunSpecifiedBenchmarks();
  return 0;
}
