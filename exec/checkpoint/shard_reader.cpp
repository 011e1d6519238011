#include "exec/checkpoint/shard_reader.h"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <functional>
#include <numeric>

#include "core/error.h"

namespace quintnet::exec {
namespace fs = std::filesystem;

namespace {

// The START of a piece key "NAME@START"; `at` is the position of its '@'.
std::int64_t piece_start(const std::string& key, size_t at, const std::string& path) {
  const std::string digits = key.substr(at + 1);
  if (digits.empty() || digits.find_first_not_of("0123456789") != std::string::npos || digits.size() > 18)
    throw core::UserError(path + ": '" + key + "' is not a piece of a tensor (expected NAME@START)");
  return std::stoll(digits);
}

}  // namespace

std::optional<StateKey> parse_state_key(const std::string& key, const std::string& path) {
  for (size_t k = 0; k < kStateKinds.size(); ++k) {
    if (key.rfind(kStateKinds[k], 0) != 0) continue;
    const size_t at = key.find('@', kStateKinds[k].size());
    if (at == std::string::npos) return StateKey{k, key.substr(kStateKinds[k].size()), -1};
    return StateKey{k, key.substr(kStateKinds[k].size(), at - kStateKinds[k].size()), piece_start(key, at, path)};
  }
  return std::nullopt;
}

std::int64_t copy_pieces(const TensorMap& shard, const std::string& key, torch::Tensor dest, const std::string& path) {
  const std::string prefix = key + "@";
  std::int64_t found = 0;
  for (auto it = shard.lower_bound(prefix); it != shard.end() && it->first.rfind(prefix, 0) == 0; ++it) {
    const std::int64_t start = piece_start(it->first, key.size(), path), n = it->second.numel();
    if (start + n > dest.numel())
      throw core::UserError(path + ": '" + it->first + "' (" + std::to_string(n) + " values) lies outside '" + key +
                            "' (" + std::to_string(dest.numel()) + ")");
    dest.narrow(0, start, n).copy_(it->second.reshape({-1}));
    found += n;
  }
  return found;
}

ShardReader::ShardReader(std::string checkpoint_dir, Manifest manifest)
    : dir_(std::move(checkpoint_dir)), manifest_(std::move(manifest)) {}

const TensorMap& ShardReader::shard(int rank) {
  if (auto it = cache_.find(rank); it != cache_.end()) return it->second;
  return cache_[rank] = read(rank);
}

TensorMap ShardReader::read(int rank) {
  if (rank < 0 || rank >= static_cast<int>(manifest_.shards.size()))
    throw core::UserError(dir_ + ": the checkpoint has no shard for rank " + std::to_string(rank));
  const ShardInfo& info = manifest_.shards[rank];
  const std::string path = shard_path(rank);
  std::ifstream in(path, std::ios::binary);
  if (!in) throw core::UserError(path + ": checkpoint shard is missing");
  std::vector<char> bytes((std::istreambuf_iterator<char>(in)), {});
  if (static_cast<long long>(bytes.size()) != info.bytes)
    throw core::UserError(path + ": checkpoint shard has " + std::to_string(bytes.size()) + " bytes, the manifest says " +
                          std::to_string(info.bytes) + " (truncated or replaced)");
  ++files_read_;
  bytes_read_ += info.bytes;
  TensorMap tensors;
  try {
    for (const auto& kv : torch::pickle_load(bytes).toGenericDict())
      tensors[kv.key().toStringRef()] = kv.value().toTensor();
  } catch (const c10::Error& e) {
    throw core::UserError(path + ": checkpoint shard is not readable (" + e.what_without_backtrace() + ")");
  }
  return tensors;
}

std::string ShardReader::shard_path(int rank) const {
  return (fs::path(dir_) / manifest_.shards.at(rank).file).string();
}

const ShardInfo& ShardReader::holder(const std::string& name, int tp) const {
  for (const ShardInfo& s : manifest_.shards)
    if (s.dp == 0 && s.cp == 0 && s.tp == tp && std::find(s.tensors.begin(), s.tensors.end(), name) != s.tensors.end()) return s;
  throw core::UserError(dir_ + ": no shard of the checkpoint holds '" + name + "' (tp rank " + std::to_string(tp) +
                        ")");
}

torch::Tensor ShardReader::tensor(int rank, const std::string& kind, const std::string& name) {
  const TensorMap& own = shard(rank);
  if (auto it = own.find(kind + name); it != own.end()) return it->second;
  // ZeRO-1: the dp ranks of this stage and tp rank (and cp rank: the replicas) each hold
  // the state whole or in parts.
  const ShardInfo& me = manifest_.shards[rank];
  const std::vector<std::int64_t> shape = shape_of(rank, name);
  torch::Tensor whole = torch::empty({std::accumulate(shape.begin(), shape.end(), std::int64_t{1}, std::multiplies<>())}, torch::kFloat32);
  std::int64_t covered = 0;
  for (const ShardInfo& peer : manifest_.shards) {
    if (peer.tp != me.tp || peer.pp != me.pp) continue;
    const TensorMap& t = shard(peer.rank);
    if (auto it = t.find(kind + name); it != t.end()) return it->second;  // a peer holds it whole
    covered += copy_pieces(t, kind + name, whole, shard_path(peer.rank));
  }
  if (covered != whole.numel())
    throw core::UserError(dir_ + ": the shards of dp group (tp " + std::to_string(me.tp) + ", pp " +
                          std::to_string(me.pp) + ") hold " + std::to_string(covered) + " of the " +
                          std::to_string(whole.numel()) + " values of '" + kind + name + "'");
  return whole.view(shape);
}

std::vector<std::int64_t> ShardReader::shape_of(int rank, const std::string& name) {
  const ShardInfo& info = manifest_.shards[rank];
  if (auto it = info.shapes.find(name); it != info.shapes.end()) return it->second;
  // A version-1 checkpoint: every shard holds its parameters whole.
  const TensorMap& own = shard(rank);
  if (auto it = own.find("param/" + name); it != own.end()) return it->second.sizes().vec();
  throw core::UserError(dir_ + ": rank " + std::to_string(rank) + "'s shard lacks '" + name + "' and its shape");
}

torch::Tensor ShardReader::serial(const std::string& kind, const std::string& name) {
  auto piece = [&](int tp) { return tensor(holder(name, tp).rank, kind, name); };
  auto dim = manifest_.tp_shard_dims.find(name);
  if (dim == manifest_.tp_shard_dims.end() || manifest_.tp == 1) return piece(0);
  std::vector<torch::Tensor> pieces;
  for (int tp = 0; tp < manifest_.tp; ++tp) pieces.push_back(piece(tp));
  torch::Tensor whole = torch::cat(pieces, dim->second);
  // A vocabulary padded to a multiple of tp: the serial tensor has the real rows.
  if (auto rows = manifest_.vocabulary_rows.find(name); rows != manifest_.vocabulary_rows.end())
    whole = whole.narrow(0, 0, std::min(rows->second, whole.size(0)));
  return whole;
}

std::vector<std::string> ShardReader::parameter_names() const {
  std::vector<std::string> names;
  for (const ShardInfo& s : manifest_.shards)
    if (s.dp == 0 && s.cp == 0 && s.tp == 0) names.insert(names.end(), s.tensors.begin(), s.tensors.end());
  return names;
}

}  // namespace quintnet::exec
