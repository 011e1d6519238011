#include "exec/trace/trace_recorder.h"

#include <unistd.h>

#include <algorithm>
#include <fstream>
#include <functional>
#include <map>
#include <tuple>

#include "core/trace_analysis.h"
#include "exec/comm/communicator.h"

namespace quintnet::exec {

TraceRecorder::TraceRecorder(const core::Mesh& mesh, int rank) : mesh_(mesh), rank_(rank) {}

void TraceRecorder::event(core::Lane lane, const std::string& kind, const std::string& name, Clock::time_point start,
                          Clock::time_point end, int mb, int chunk, std::int64_t bytes, int peer) {
  if (!active_) return;
  core::TraceEvent e;
  e.name = name;
  e.kind = kind;
  e.rank = rank_;
  e.lane = lane;
  e.ts_us = us(start);
  e.dur_us = std::max(0.0, us(end) - us(start));
  e.step = step_;
  e.mb = mb;
  e.chunk = chunk;
  e.bytes = bytes;
  e.peer = peer;
  events_.push_back(std::move(e));
}

void TraceRecorder::send(int tag, int to_rank, Clock::time_point at) {
  if (active_) sends_.push_back({step_, tag, to_rank, us(at)});
}

void TraceRecorder::recv(int tag, int from_rank, Clock::time_point at) {
  if (active_) recvs_.push_back({step_, tag, from_rank, us(at)});
}

namespace {

// Which boot of which machine this process runs on: the steady clock counts from it.
std::int64_t machine_boot_id() {
  std::string id;
  std::ifstream("/proc/sys/kernel/random/boot_id") >> id;
  if (id.empty()) {
    char host[256] = {};
    gethostname(host, sizeof host - 1);
    id = host;
  }
  return static_cast<std::int64_t>(std::hash<std::string>{}(id));
}

}  // namespace

void TraceRecorder::share_origin(Communicator& comm, const torch::Device& device) {
  const std::int64_t boot = machine_boot_id();
  torch::Tensor t = torch::tensor({static_cast<std::int64_t>(origin_.time_since_epoch().count()), boot},
                                  torch::kInt64).to(device);
  comm.broadcast(comm.world(), t, 0);
  t = t.cpu();
  if (t[1].item<std::int64_t>() == boot) origin_ = Clock::time_point(Clock::duration(t[0].item<std::int64_t>()));
}

std::vector<core::TraceEvent> TraceRecorder::take_step(int step) {
  std::vector<core::TraceEvent> taken;
  auto keep = std::stable_partition(events_.begin(), events_.end(), [&](const core::TraceEvent& e) { return e.step != step; });
  taken.assign(std::make_move_iterator(keep), std::make_move_iterator(events_.end()));
  events_.erase(keep, events_.end());
  auto of_step = [&](const Endpoint& e) { return e.step == step; };
  sends_.erase(std::remove_if(sends_.begin(), sends_.end(), of_step), sends_.end());
  recvs_.erase(std::remove_if(recvs_.begin(), recvs_.end(), of_step), recvs_.end());
  return taken;
}

core::Trace TraceRecorder::merge_and_write(Communicator& comm, const std::string& path, const nlohmann::json& plan,
                                           const nlohmann::json& platform) {
  // This rank's part as JSON: events in the trace format, message endpoints aside.
  core::Trace mine;
  mine.ranks.resize(static_cast<size_t>(mesh_.world_size()));
  mine.events = events_;
  nlohmann::json part = core::trace_to_json(mine);
  auto endpoints = [](const std::vector<Endpoint>& list) {
    nlohmann::json out = nlohmann::json::array();
    for (const auto& e : list) out.push_back({e.step, e.tag, e.peer, e.ts});
    return out;
  };
  part["sends"] = endpoints(sends_);
  part["recvs"] = endpoints(recvs_);
  const std::vector<std::string> parts = comm.gather_strings(part.dump());
  if (rank_ != 0) return {};

  core::Trace merged;
  merged.source = "exec";
  merged.plan = plan;
  merged.platform = platform;
  for (int r = 0; r < mesh_.world_size(); ++r)
    merged.ranks.push_back({mesh_.coord(r, core::Axis::Dp), mesh_.coord(r, core::Axis::Tp), mesh_.coord(r, core::Axis::Pp),
                            mesh_.coord(r, core::Axis::Cp)});
  std::map<std::tuple<int, int, int, int>, double> send_at;  // (step, tag, from, to) -> ts
  std::vector<std::tuple<int, int, int, int, double>> recv_at;
  for (int r = 0; r < static_cast<int>(parts.size()); ++r) {
    const nlohmann::json j = nlohmann::json::parse(parts[r]);
    core::Trace t = core::trace_from_json(j, "rank " + std::to_string(r));
    for (auto& e : t.events) merged.events.push_back(std::move(e));
    for (const auto& s : j["sends"]) send_at[{s[0], s[1], r, s[2]}] = s[3];
    for (const auto& v : j["recvs"]) recv_at.emplace_back(v[0], v[1], v[2], r, v[3]);
  }
  std::uint64_t id = 1;
  for (const auto& [step, tag, from, to, ts] : recv_at) {
    auto it = send_at.find({step, tag, from, to});
    if (it == send_at.end()) continue;
    merged.flows.push_back({id++, from, core::Lane::P2P, it->second, to, core::Lane::P2P, std::max(ts, it->second)});
  }
  merged.summary = {{"measured_bubble_fraction", core::measured_bubble_fraction(merged)}};
  core::write_trace(merged, path);
  return merged;
}

}  // namespace quintnet::exec
