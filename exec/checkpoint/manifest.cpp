#include "exec/checkpoint/manifest.h"

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <stdexcept>

#include "core/atomic_file.h"
#include "core/error.h"

namespace quintnet::exec {
namespace fs = std::filesystem;
using Json = nlohmann::json;

namespace {
// Version 2 (session 34): under ZeRO-1 the masters are sharded on disk like the moments,
// without it only the first replica writes the state, each shard records its parameters'
// shapes and the manifest the vocabulary's real rows.  Version 1 checkpoints still load.
constexpr int kFormatVersion = 2;
constexpr const char* kFormat = "quintnet-checkpoint";
}  // namespace

std::string step_dir_name(long step) {
  char name[32];
  std::snprintf(name, sizeof(name), "step-%08ld", step);
  return name;
}

Json shard_to_json(const ShardInfo& s) {
  Json j = {{"rank", s.rank}, {"dp", s.dp}, {"tp", s.tp}, {"pp", s.pp}, {"cp", s.cp}, {"file", s.file}, {"bytes", s.bytes},
            {"tensors", s.tensors}, {"shapes", s.shapes}};
  if (s.state) j["state"] = *s.state;
  return j;
}

ShardInfo shard_from_json(const Json& j) {
  ShardInfo s;
  s.rank = j.at("rank").get<int>();
  s.dp = j.at("dp").get<int>(), s.tp = j.at("tp").get<int>(), s.pp = j.at("pp").get<int>();
  s.cp = j.value("cp", 0);
  s.file = j.at("file").get<std::string>();
  s.bytes = j.at("bytes").get<long long>();
  s.tensors = j.at("tensors").get<std::vector<std::string>>();
  if (j.contains("shapes")) s.shapes = j.at("shapes").get<std::map<std::string, std::vector<std::int64_t>>>();
  if (j.contains("state")) s.state = j.at("state").get<std::vector<std::string>>();
  for (const auto& [name, shape] : s.shapes)
    for (std::int64_t d : shape)
      if (d < 0) throw std::invalid_argument("'" + name + "' has a negative size in its shape");
  return s;
}

Json manifest_to_json(const Manifest& m) {
  Json shards = Json::array();
  for (const ShardInfo& s : m.shards) shards.push_back(shard_to_json(s));
  return {{"format", kFormat},
          {"version", kFormatVersion},
          {"step", m.step},
          {"total_steps", m.total_steps},
          {"best_val_loss", m.best_val_loss},
          {"epochs_without_improvement", m.epochs_without_improvement},
          {"epoch_stats", m.epoch_stats},
          {"mesh", {{"dp", m.dp}, {"tp", m.tp}, {"pp", m.pp}, {"cp", m.cp}, {"chunks", m.chunks}}},
          {"tp_shard_dims", m.tp_shard_dims},
          {"vocabulary_rows", m.vocabulary_rows},
          {"plan", m.plan},
          {"shards", shards}};
}

Manifest read_manifest(const std::string& checkpoint_dir) {
  const std::string path = (fs::path(checkpoint_dir) / "manifest.json").string();
  std::ifstream in(path);
  if (!in) throw core::UserError(path + ": no manifest - not a complete QuintNet checkpoint");
  Manifest m;
  std::string field = "(document)";
  try {
    const Json j = Json::parse(in);
    field = "format";
    if (j.at("format").get<std::string>() != kFormat) throw core::UserError("");
    field = "version";
    if (const int v = j.at("version").get<int>(); v < 1 || v > kFormatVersion)
      throw core::UserError("version " + std::to_string(v) + "; this QuintNet reads versions 1 to " +
                            std::to_string(kFormatVersion));
    field = "step";
    m.step = j.at("step").get<long>();
    field = "total_steps";
    m.total_steps = j.at("total_steps").get<long>();
    field = "best_val_loss";
    m.best_val_loss = j.at("best_val_loss").get<double>();
    field = "epochs_without_improvement";
    m.epochs_without_improvement = j.at("epochs_without_improvement").get<int>();
    field = "epoch_stats";
    m.epoch_stats = j.at("epoch_stats").get<std::array<double, 3>>();
    field = "mesh";
    const Json& mesh = j.at("mesh");
    m.dp = mesh.at("dp").get<int>();
    m.tp = mesh.at("tp").get<int>();
    m.pp = mesh.at("pp").get<int>();
    m.cp = mesh.value("cp", 1);
    m.chunks = mesh.at("chunks").get<int>();
    field = "tp_shard_dims";
    m.tp_shard_dims = j.at("tp_shard_dims").get<std::map<std::string, int>>();
    field = "vocabulary_rows";
    if (j.contains("vocabulary_rows")) m.vocabulary_rows = j.at("vocabulary_rows").get<std::map<std::string, std::int64_t>>();
    field = "plan";
    m.plan = j.at("plan");
    field = "shards";
    for (const Json& s : j.at("shards")) m.shards.push_back(shard_from_json(s));
    if (m.shards.size() != static_cast<size_t>(m.dp * m.tp * m.pp * m.cp)) throw core::UserError("");
  } catch (const std::exception& e) {
    throw core::UserError(path + ": malformed manifest at '" + field + "'" +
                          (std::string(e.what()).empty() ? "" : " (" + std::string(e.what()) + ")"));
  }
  return m;
}

void write_manifest(const std::string& checkpoint_dir, const Manifest& m) {
  core::write_file_atomically((fs::path(checkpoint_dir) / "manifest.json").string(), manifest_to_json(m).dump(1) + "\n");
}

std::string resolve_checkpoint(const std::string& path) {
  if (fs::exists(fs::path(path) / "manifest.json")) return path;
  const fs::path latest = fs::path(path) / "latest";
  std::ifstream in(latest);
  std::string name;
  if (in && std::getline(in, name) && !name.empty() && fs::exists(fs::path(path) / name / "manifest.json"))
    return (fs::path(path) / name).string();
  if (!fs::exists(path)) throw core::UserError(path + ": no such checkpoint directory");
  throw core::UserError(path + ": not a checkpoint (no manifest.json) and no complete checkpoint named by " +
                        latest.string());
}

}  // namespace quintnet::exec
