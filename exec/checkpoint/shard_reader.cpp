#include "exec/checkpoint/shard_reader.h"

#include <filesystem>
#include <fstream>

#include "core/error.h"

namespace quintnet::exec {
namespace fs = std::filesystem;

ShardReader::ShardReader(std::string checkpoint_dir, Manifest manifest)
    : dir_(std::move(checkpoint_dir)), manifest_(std::move(manifest)) {}

const TensorMap& ShardReader::shard(int rank) {
  if (auto it = cache_.find(rank); it != cache_.end()) return it->second;
  if (rank < 0 || rank >= static_cast<int>(manifest_.shards.size()))
    throw core::UserError(dir_ + ": the checkpoint has no shard for rank " + std::to_string(rank));
  const ShardInfo& info = manifest_.shards[rank];
  const std::string path = (fs::path(dir_) / info.file).string();
  std::ifstream in(path, std::ios::binary);
  if (!in) throw core::UserError(path + ": checkpoint shard is missing");
  std::vector<char> bytes((std::istreambuf_iterator<char>(in)), {});
  if (static_cast<long long>(bytes.size()) != info.bytes)
    throw core::UserError(path + ": checkpoint shard has " + std::to_string(bytes.size()) + " bytes, the manifest says " +
                          std::to_string(info.bytes) + " (truncated or replaced)");
  TensorMap tensors;
  try {
    for (const auto& kv : torch::pickle_load(bytes).toGenericDict())
      tensors[kv.key().toStringRef()] = kv.value().toTensor();
  } catch (const c10::Error& e) {
    throw core::UserError(path + ": checkpoint shard is not readable (" + e.what_without_backtrace() + ")");
  }
  return cache_[rank] = std::move(tensors);
}

const ShardInfo& ShardReader::holder(const std::string& name, int tp) const {
  for (const ShardInfo& s : manifest_.shards)
    if (s.dp == 0 && s.tp == tp && std::find(s.tensors.begin(), s.tensors.end(), name) != s.tensors.end()) return s;
  throw core::UserError(dir_ + ": no shard of the checkpoint holds '" + name + "' (tp rank " + std::to_string(tp) +
                        ")");
}

torch::Tensor ShardReader::serial(const std::string& kind, const std::string& name) {
  auto piece = [&](int tp) {
    const TensorMap& t = shard(holder(name, tp).rank);
    auto it = t.find(kind + name);
    if (it == t.end()) throw core::UserError(dir_ + ": shard lacks '" + kind + name + "'");
    return it->second;
  };
  auto dim = manifest_.tp_shard_dims.find(name);
  if (dim == manifest_.tp_shard_dims.end() || manifest_.tp == 1) return piece(0);
  std::vector<torch::Tensor> pieces;
  for (int tp = 0; tp < manifest_.tp; ++tp) pieces.push_back(piece(tp));
  return torch::cat(pieces, dim->second);
}

std::vector<std::string> ShardReader::parameter_names() const {
  std::vector<std::string> names;
  for (const ShardInfo& s : manifest_.shards)
    if (s.dp == 0 && s.tp == 0) names.insert(names.end(), s.tensors.begin(), s.tensors.end());
  return names;
}

}  // namespace quintnet::exec
