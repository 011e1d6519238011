#include "exec/checkpoint/reshard.h"

#include <algorithm>
#include <map>
#include <set>
#include <tuple>

#include "core/error.h"
#include "exec/models/serial_state.h"

namespace quintnet::exec {
namespace {

// A shape folded around the dimension tp splits, `dim`, as [outer, rows, inner]: the
// dimensions before it, it, and those after it (dim -1, unsplit: [1, numel, 1]).  A tp
// slice is then `rows` consecutive rows of the serial tensor's [outer, serial rows, inner].
struct Folded {
  std::int64_t outer = 1, rows = 1, inner = 1;
};

Folded fold(c10::IntArrayRef shape, int dim) {
  Folded f;
  for (int d = 0; d < static_cast<int>(shape.size()); ++d)
    (dim < 0 || d == dim ? f.rows : d < dim ? f.outer : f.inner) *= shape[d];
  return f;
}

// What this rank needs of one parameter.
struct Target {
  const FlatParameters::Slot* slot = nullptr;
  int dim = -1;                          // the dimension either side splits over tp; -1: neither does
  bool checkpoint_splits = false;        // the checkpoint's tp ranks hold slices (else each the whole)
  bool vocabulary = false;               // rows past `real` are padding, on either side
  Folded mine;                           // this rank's slice
  std::int64_t first = 0;                // serial row of its first row
  std::int64_t serial_rows = 0;          // this model's serial rows, padding included
  std::int64_t real = 0;                 // serial rows that are not padding
  std::array<std::int64_t, 3> filled{};  // values copied in, per kind (kStateKinds)

  std::int64_t expected() const {
    return mine.outer * std::clamp<std::int64_t>(real - first, 0, mine.rows) * mine.inner;
  }
};

std::map<std::string, Target> targets_of(const Manifest& m, torch::nn::Module& model,
                                         const FlatParameters& flat, const TpContext& tp) {
  const auto dims = tp_shard_dims(model);
  const auto vocabulary = vocabulary_rows(model);
  std::map<std::string, Target> targets;
  for (const auto& slot : flat.slots()) {
    Target t;
    t.slot = &slot;
    const auto mine = dims.find(slot.name);
    const auto theirs = m.tp_shard_dims.find(slot.name);
    const int my_dim = mine == dims.end() ? -1 : mine->second,
              their_dim = theirs == m.tp_shard_dims.end() ? -1 : theirs->second;
    if (my_dim >= 0 && their_dim >= 0 && my_dim != their_dim)
      throw core::UserError("checkpoint: '" + slot.name + "' is split over tp along dimension " +
                            std::to_string(their_dim) + ", this model splits it along dimension " +
                            std::to_string(my_dim));
    t.dim = my_dim >= 0 ? my_dim : their_dim;
    t.checkpoint_splits = their_dim >= 0;
    t.mine = fold(slot.param.sizes(), t.dim);
    t.first = (my_dim >= 0 ? tp.rank() : 0) * t.mine.rows;
    t.serial_rows = t.mine.rows * (my_dim >= 0 ? tp.size() : 1);
    const auto v = vocabulary.find(slot.name);
    t.vocabulary = v != vocabulary.end();
    t.real = t.vocabulary ? v->second : t.serial_rows;
    targets[slot.name] = t;
  }
  return targets;
}

// The checkpoint's slice `shape`, from the shard of its tp rank `tp_rank` of `tp_size`,
// checked against this model's parameter: its folded shape and first serial row.
std::pair<Folded, std::int64_t> source_slice(const Target& t, const std::string& key, c10::IntArrayRef shape,
                                             int tp_rank, int tp_size) {
  const Folded f = fold(shape, t.dim);
  const int parts = t.checkpoint_splits ? tp_size : 1;
  const c10::IntArrayRef mine = t.slot->param.sizes();
  bool fits = shape.size() == mine.size() &&
              (t.vocabulary ? f.rows * parts >= t.real : f.rows * parts == t.serial_rows);
  for (size_t d = 0; fits && d < shape.size(); ++d)
    fits = static_cast<int>(d) == t.dim || shape[d] == mine[d];
  if (!fits) {
    std::vector<std::int64_t> theirs = shape.vec(), expected = mine.vec();
    if (t.dim >= 0 && t.dim < static_cast<int>(theirs.size())) theirs[t.dim] *= parts;
    if (t.dim >= 0) expected[t.dim] = t.real;
    throw core::UserError("checkpoint: '" + key + "' has shape " + c10::str(c10::IntArrayRef(theirs)) +
                          ", this model expects " + c10::str(c10::IntArrayRef(expected)));
  }
  return {f, t.checkpoint_splits ? tp_rank * f.rows : 0};
}

// Copies what `piece` holds of `dest`.  `piece`: values [start, start + numel) of a slice
// folded as [outer, width] whose columns are the serial columns [from, from + width);
// `dest`: [outer, dest width], serial columns [dest_from, …), those at or past `limit`
// (a vocabulary's padding) left alone.  A piece is a partial first row, whole rows and a
// partial last row: three copies at most.  Returns the values copied.
std::int64_t copy_overlap(const torch::Tensor& piece, std::int64_t start, std::int64_t width,
                          std::int64_t from, torch::Tensor& dest, std::int64_t dest_from,
                          std::int64_t limit) {
  const std::int64_t end = start + piece.numel();
  const std::int64_t lo = dest_from, hi = std::min(dest_from + dest.size(1), limit);
  std::int64_t copied = 0;
  for (std::int64_t pos = start; pos < end;) {
    const std::int64_t row = pos / width, col = pos % width;
    std::int64_t rows = 1, cols = std::min(width - col, end - pos);
    if (col == 0 && end - pos >= width) rows = (end - pos) / width;
    const std::int64_t x0 = std::max(from + col, lo), x1 = std::min(from + col + cols, hi);
    if (x0 < x1) {
      const torch::Tensor band = piece.narrow(0, pos - start, rows * cols).view({rows, cols});
      dest.narrow(0, row, rows)
          .narrow(1, x0 - dest_from, x1 - x0)
          .copy_(band.narrow(1, x0 - from - col, x1 - x0));
      copied += rows * (x1 - x0);
    }
    pos += rows * cols;
  }
  return copied;
}

// Whether shard `s` holds a part of `t` this rank needs: the tp rank whose slice overlaps
// this rank's (or, for a parameter the checkpoint holds whole on every tp rank, the one
// chosen to read it from).  A version-1 manifest has no shapes: then any tp rank might.
bool overlaps(const Target& t, const ShardInfo& s, int whole_from) {
  if (!t.checkpoint_splits) return s.tp == whole_from;
  const auto shape = s.shapes.find(t.slot->name);
  if (shape == s.shapes.end()) return true;
  const std::int64_t rows = fold(shape->second, t.dim).rows, first = s.tp * rows;
  return first < std::min(t.first + t.mine.rows, t.real) && t.first < first + rows;
}

// The state shard `s` holds of the targets, copied into `buffers`.  `whole_seen`: the
// tensors already copied whole (a version-1 ZeRO-1 checkpoint repeats the masters in
// every replica's shard).
void copy_shard(ShardReader& reader, const ShardInfo& s, int whole_from,
                std::map<std::string, Target>& targets, std::array<torch::Tensor, 3>& buffers,
                std::set<std::tuple<size_t, std::string, int>>& whole_seen) {
  const Manifest& m = reader.manifest();
  const std::string path = reader.shard_path(s.rank);
  const TensorMap shard = reader.read(s.rank);
  for (const auto& [key, values] : shard) {
    const std::optional<StateKey> k = parse_state_key(key, path);
    if (!k) continue;
    const auto it = targets.find(k->name);
    if (it == targets.end() || !overlaps(it->second, s, whole_from)) continue;
    Target& t = it->second;
    if (k->start < 0 && !whole_seen.insert({k->kind, k->name, s.tp}).second) continue;
    // A piece's slice shape is in the manifest (a version-1 shard holds the masters whole).
    c10::IntArrayRef shape = values.sizes();
    if (k->start >= 0) {
      const auto known = s.shapes.find(k->name);
      const auto masters = shard.find(kStateKinds[0] + k->name);
      if (known != s.shapes.end())
        shape = known->second;
      else if (masters != shard.end())
        shape = masters->second.sizes();
      else
        throw core::UserError(path + ": holds a piece of '" + k->name + "' but its shape is not recorded");
    }
    const auto [slice, first] = source_slice(t, key, shape, s.tp, m.tp);
    const std::int64_t start = std::max<std::int64_t>(k->start, 0), width = slice.rows * slice.inner;
    if (start + values.numel() > slice.outer * width)
      throw core::UserError(path + ": '" + key + "' (" + std::to_string(values.numel()) +
                            " values) lies outside '" + kStateKinds[k->kind] + k->name + "' (" +
                            std::to_string(slice.outer * width) + ")");
    torch::Tensor dest = buffers[k->kind]
                             .narrow(0, t.slot->offset, t.slot->numel)
                             .view({t.mine.outer, t.mine.rows * t.mine.inner});
    t.filled[k->kind] += copy_overlap(values.reshape({-1}), start, width, first * slice.inner, dest,
                                      t.first * t.mine.inner, t.real * t.mine.inner);
  }
}

}  // namespace

void fill_from_shards(ShardReader& reader, torch::nn::Module& model, const FlatParameters& flat,
                      const TpContext& tp, std::array<torch::Tensor, 3>& buffers) {
  const Manifest& m = reader.manifest();
  std::map<std::string, Target> targets = targets_of(m, model, flat, tp);
  // Without ZeRO-1 the first replica's shards hold the state (and, before session 34,
  // every replica's the same); with it the replicas' shards hold it in pieces.
  const bool zero = m.plan.value("zero_stage", 0) >= 1;
  // Of a parameter the checkpoint's tp ranks each hold whole, read the copy of the tp rank
  // whose slices start where this rank's do: the shard it reads anyway.
  const int whole_from = tp.rank() * m.tp / tp.size();
  std::set<std::tuple<size_t, std::string, int>> whole_seen;
  for (const ShardInfo& s : m.shards) {
    if (!zero && (s.dp != 0 || s.cp != 0)) continue;
    const std::vector<std::string>& held = s.state ? *s.state : s.tensors;
    const bool needed = std::any_of(held.begin(), held.end(), [&](const std::string& name) {
      const auto it = targets.find(name);
      return it != targets.end() && overlaps(it->second, s, whole_from);
    });
    if (needed) copy_shard(reader, s, whole_from, targets, buffers, whole_seen);
  }
  for (const auto& [name, t] : targets)
    for (size_t k = 0; k < kStateKinds.size(); ++k)
      if (t.filled[k] != t.expected())
        throw core::UserError(reader.dir() + ": its shards hold " + std::to_string(t.filled[k]) + " of the " +
                              std::to_string(t.expected()) + " values of '" + kStateKinds[k] + name +
                              "' that tp rank " + std::to_string(tp.rank()) + " of " +
                              std::to_string(tp.size()) + " needs");
}

}  // namespace quintnet::exec
