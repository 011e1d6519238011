#include "exec/train/step_profiler.h"

#include <torch/csrc/autograd/profiler_kineto.h>
#include <torch/csrc/autograd/profiler_legacy.h>
#include <torch/version.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <sstream>

#include <nlohmann/json.hpp>

#include "core/atomic_file.h"
#include "core/error.h"

namespace quintnet::exec {
namespace {

namespace prof = torch::autograd::profiler;
using torch::profiler::impl::ActivityType;
using torch::profiler::impl::ProfilerConfig;
using torch::profiler::impl::ProfilerState;

// LibTorch 2 counts in nanoseconds where 1.13 counted in microseconds.
#if TORCH_VERSION_MAJOR >= 2
double start_us(const prof::KinetoEvent& e) { return static_cast<double>(e.startNs()) / 1e3; }
double duration_us(const prof::KinetoEvent& e) { return static_cast<double>(e.durationNs()) / 1e3; }
#else
double start_us(const prof::KinetoEvent& e) { return static_cast<double>(e.startUs()); }
double duration_us(const prof::KinetoEvent& e) { return static_cast<double>(e.durationUs()); }
#endif

struct Span {
  const prof::KinetoEvent* event;
  double start, end, self;
};

// Self time per op and device: on each CPU thread, an op's children (ops that start
// and end inside it) are subtracted from it; GPU activity does not nest.
std::vector<StepProfiler::Row> self_times(const std::vector<prof::KinetoEvent>& events, int steps) {
  std::map<std::uint64_t, std::vector<Span>> by_thread;
  std::vector<Span> device_spans;
  for (const prof::KinetoEvent& e : events) {
    const double start = start_us(e), end = start + duration_us(e);
    (e.deviceType() == c10::DeviceType::CPU ? by_thread[e.startThreadId()] : device_spans)
        .push_back({&e, start, end, end - start});
  }
  std::vector<Span> all = device_spans;
  for (auto& [thread, spans] : by_thread) {
    std::sort(spans.begin(), spans.end(),
              [](const Span& a, const Span& b) { return a.start != b.start ? a.start < b.start : a.end > b.end; });
    std::vector<Span*> open;
    for (Span& s : spans) {
      while (!open.empty() && open.back()->end <= s.start) open.pop_back();
      if (!open.empty() && s.end <= open.back()->end) open.back()->self -= s.end - s.start;
      open.push_back(&s);
    }
    all.insert(all.end(), spans.begin(), spans.end());
  }
  std::map<std::pair<std::string, std::string>, StepProfiler::Row> rows;
  std::map<std::string, double> device_total;
  for (const Span& s : all) {
    const std::string device = s.event->deviceType() == c10::DeviceType::CPU ? "cpu" : "cuda";
    StepProfiler::Row& row = rows[{s.event->name(), device}];
    row.name = s.event->name();
    row.device = device;
    row.calls_per_step += 1.0 / steps;
    row.self_ms_per_step += std::max(0.0, s.self) / 1e3 / steps;
    device_total[device] += std::max(0.0, s.self) / 1e3 / steps;
  }
  std::vector<StepProfiler::Row> out;
  for (auto& [key, row] : rows) {
    row.share = device_total[row.device] > 0 ? row.self_ms_per_step / device_total[row.device] : 0.0;
    out.push_back(row);
  }
  std::sort(out.begin(), out.end(), [](const auto& a, const auto& b) { return a.self_ms_per_step > b.self_ms_per_step; });
  return out;
}

// The profile as a Chrome trace of our own, where LibTorch was built without Kineto
// (Debian's 1.13): every op a complete event on its thread, GPU activity on its own row.
void write_chrome_trace(const std::vector<prof::KinetoEvent>& events, int rank, const std::string& path) {
  nlohmann::json list = nlohmann::json::array();
  for (const prof::KinetoEvent& e : events) {
    const bool cpu = e.deviceType() == c10::DeviceType::CPU;
    list.push_back({{"name", e.name()}, {"ph", "X"}, {"ts", start_us(e)}, {"dur", duration_us(e)}, {"pid", rank},
                    {"tid", cpu ? std::to_string(e.startThreadId()) : "gpu " + std::to_string(e.deviceIndex())}});
  }
  core::write_file_atomically(path, nlohmann::json{{"traceEvents", list}}.dump());
}

std::string top_of(const std::vector<StepProfiler::Row>& rows, const std::string& device, int n) {
  std::ostringstream out;
  char line[256];
  int shown = 0;
  for (const auto& r : rows) {
    if (r.device != device) continue;
    if (shown++ == n) break;
    std::snprintf(line, sizeof(line), "  %-4s %8.3f ms/step %5.1f%%  %6.1f calls  %s\n", r.device.c_str(),
                  r.self_ms_per_step, 100 * r.share, r.calls_per_step, r.name.substr(0, 90).c_str());
    out << line;
  }
  return out.str();
}

}  // namespace

StepProfiler::StepProfiler(std::string dir, int steps, long total_steps, int rank, bool cuda)
    : dir_(std::move(dir)), first_(total_steps > 1 ? 1 : 0), end_(first_ + steps), rank_(rank), cuda_(cuda) {
  if (dir_.empty()) return;
  std::error_code ec;
  std::filesystem::create_directories(dir_, ec);
  if (ec) throw core::UserError("--profile " + dir_ + ": cannot create the directory: " + ec.message());
}

void StepProfiler::begin_step(long step) {
  if (dir_.empty() || step != first_) return;
  std::set<ActivityType> activities = {ActivityType::CPU};
  if (cuda_) activities.insert(ActivityType::CUDA);
  const ProfilerConfig config(ProfilerState::KINETO);
  prof::prepareProfiler(config, activities);
  prof::enableProfiler(config, activities);
  running_ = true;
}

std::string StepProfiler::end_step(long step, bool last) {
  if (!running_) return "";
  ++profiled_;
  if (step + 1 < end_ && !last) return "";
  return stop_and_write();
}

std::string StepProfiler::stop_and_write() {
  running_ = false;
  if (cuda_) torch::cuda::synchronize();  // the steps' kernels may still be running: let them end inside
  const std::unique_ptr<prof::ProfilerResult> result = prof::disableProfiler();
  const std::string base = dir_ + "/";
  const std::string trace = base + "trace.rank" + std::to_string(rank_) + ".json";
  try {
    result->save(trace);
  } catch (const c10::Error&) {  // "Saving a trace requires ... Kineto": LibTorch without it
    write_chrome_trace(result->events(), rank_, trace);
  }
  const std::vector<Row> rows = self_times(result->events(), profiled_);
  std::ofstream tsv(base + "ops.rank" + std::to_string(rank_) + ".tsv");
  tsv << "op\tdevice\tcalls_per_step\tself_ms_per_step\tshare\n";
  for (const Row& r : rows)
    tsv << r.name << '\t' << r.device << '\t' << r.calls_per_step << '\t' << r.self_ms_per_step << '\t' << r.share << '\n';
  if (!tsv) throw core::UserError("--profile " + dir_ + ": cannot write ops.rank" + std::to_string(rank_) + ".tsv");
  std::string top = "profile of rank " + std::to_string(rank_) + " (steps " + std::to_string(first_ + 1) + "-" +
                    std::to_string(first_ + profiled_) + "), the ops with the most self time per step:\n" + top_of(rows, "cpu", 12);
  if (cuda_) top += top_of(rows, "cuda", 12);
  return top + "  (all ops: " + base + "ops.rank" + std::to_string(rank_) + ".tsv; trace: " + base + "trace.rank" +
         std::to_string(rank_) + ".json)";
}

void enable_nvtx_ranges() {
  if (!torch::cuda::is_available())
    throw core::UserError("--nvtx: NVTX ranges need a CUDA build of LibTorch and a GPU (this one has none)");
  prof::enableProfilerLegacy(ProfilerConfig(ProfilerState::NVTX));
}

}  // namespace quintnet::exec
