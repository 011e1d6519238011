#include "exec/checkpoint/checkpoint.h"

#include <array>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <iostream>

#include "core/atomic_file.h"
#include "core/error.h"
#include "exec/checkpoint/reshard.h"
#include "exec/checkpoint/shard_reader.h"
#include "exec/models/serial_state.h"

namespace quintnet::exec {
namespace fs = std::filesystem;

namespace {

std::string shard_file(int rank) {
  char name[32];
  std::snprintf(name, sizeof(name), "rank-%05d.pt", rank);
  return name;
}

// The slot's part of a flat buffer (parameters or an AdamW moment), shaped like the parameter.
torch::Tensor slot_view(torch::Tensor& flat, const FlatParameters::Slot& s) {
  return flat.narrow(0, s.offset, s.numel).view(s.param.sizes());
}

// Fault injection for the crash-during-save test: QN_FAULT_KILL_IN_SAVE=RANK:STEP makes
// that rank die after writing half of its shard at that step, as a killed process would.
void maybe_die_mid_write(int rank, long step, const std::string& path, const std::vector<char>& bytes) {
  const char* spec = std::getenv("QN_FAULT_KILL_IN_SAVE");
  if (!spec || std::to_string(rank) + ":" + std::to_string(step) != spec) return;
  if (FILE* f = std::fopen((path + ".tmp").c_str(), "wb")) {
    std::fwrite(bytes.data(), 1, bytes.size() / 2, f);
    std::fclose(f);
  }
  std::cerr << "rank " << rank << ": QN_FAULT_KILL_IN_SAVE: dying in the middle of saving step " << step << std::endl;
  std::_Exit(9);
}

// The slot's state this rank holds — masters ("param/"), and AdamW's two moments: the
// whole of each under "param/NAME" (and "exp_avg/NAME", "exp_avg_sq/NAME") when one piece
// covers the parameter (always without ZeRO-1), else each part a piece covers, flattened,
// under "param/NAME@START" (START: the part's first element in the flattened parameter).
// So ZeRO-1's state stays sharded on disk as in memory, each dp rank writing 1/dp of it
// and nothing gathered to save; a resume on another mesh (reshard.h) and `quintnet checkpoint
// export` (ShardReader) put it back together from the dp ranks' shards.
// Returns whether any piece covers a part of the slot.
bool insert_state(c10::Dict<std::string, torch::Tensor>& dict, const FlatParameters::Slot& slot,
                  const std::vector<FlatAdamW::StatePiece>& pieces) {
  bool inserted = false;
  for (const FlatAdamW::StatePiece& p : pieces) {
    const std::int64_t begin = std::max(slot.offset, p.offset);
    const std::int64_t end = std::min(slot.offset + slot.numel, p.offset + p.exp_avg.numel());
    if (begin >= end) continue;
    const bool whole = end - begin == slot.numel;
    const std::string suffix = whole ? "" : "@" + std::to_string(begin - slot.offset);
    auto part = [&](const torch::Tensor& state) {
      // Cloned: pickling a view would store its whole buffer.
      const torch::Tensor t = state.narrow(0, begin - p.offset, end - begin).clone().cpu();
      return whole ? t.view(slot.param.sizes()) : t;
    };
    const torch::Tensor* states[] = {&p.masters, &p.exp_avg, &p.exp_avg_sq};
    for (size_t k = 0; k < kStateKinds.size(); ++k) dict.insert(kStateKinds[k] + slot.name + suffix, part(*states[k]));
    inserted = true;
  }
  return inserted;
}

void copy_into(torch::Tensor dst, const torch::Tensor& src, const std::string& what) {
  if (src.sizes() != dst.sizes())
    throw core::UserError("checkpoint: '" + what + "' has shape " + c10::str(src.sizes()) + ", this model expects " +
                          c10::str(dst.sizes()));
  dst.copy_(src);
}

// Resuming on the checkpoint's mesh: this rank's shard holds exactly the state it owns
// (insert_state), so it is the one file the rank reads — under ZeRO-1 the parameters of
// the other pieces are then all-gathered, not read from the dp group's shards (whose
// number grows with dp, as would the reads and the host memory holding them).  False
// when the shard's pieces are not this rank's (another bucket size, ZeRO-1 switched off).
bool fill_from_own_shard(ShardReader& reader, int rank, const FlatParameters& flat,
                         const std::vector<ZeroShards::Range>& pieces, std::array<torch::Tensor, 3>& buffers) {
  const TensorMap& own = reader.shard(rank);
  for (const auto& slot : flat.slots()) {
    std::int64_t owned = 0;  // the slot's elements this rank's pieces cover
    for (const ZeroShards::Range& p : pieces)
      owned += std::max<std::int64_t>(0, std::min(slot.offset + slot.numel, p.offset + p.numel) - std::max(slot.offset, p.offset));
    if (owned == 0) continue;
    for (size_t k = 0; k < kStateKinds.size(); ++k) {
      const std::string key = kStateKinds[k] + slot.name;
      if (auto whole = own.find(key); whole != own.end()) {
        copy_into(slot_view(buffers[k], slot), whole->second, key);
        continue;
      }
      if (copy_pieces(own, key, buffers[k].narrow(0, slot.offset, slot.numel), reader.shard_path(rank)) != owned)
        return false;
    }
  }
  return true;
}

// How tensor parallelism splits this rank's parameters, for resharding: the dimension of
// each split one, and the real rows of each vocabulary-parallel one (padded to a multiple of tp).
nlohmann::json tp_layout(ParallelModel& pm) {
  std::map<std::string, int> dims;
  std::map<std::string, std::int64_t> rows;
  for (auto& chunk : pm.chunks) {
    for (const auto& [name, dim] : tp_shard_dims(*chunk.model)) dims[name] = dim;
    for (const auto& [name, n] : vocabulary_rows(*chunk.model)) rows[name] = n;
  }
  return {{"tp_shard_dims", dims}, {"vocabulary_rows", rows}};
}

// Keys whose change makes the resumed run differ from the uninterrupted one.
void warn_about_plan_changes(const nlohmann::json& saved, const nlohmann::json& now) {
  static const std::vector<std::string> layout_keys = {"mesh_dim", "mesh_name", "strategy_name", "schedule",
                                                       "virtual_stages", "bucket_size_mb", "dataset_path",
                                                       "num_epochs", "patience"};
  for (const auto& [key, value] : saved.items()) {
    if (std::find(layout_keys.begin(), layout_keys.end(), key) != layout_keys.end()) continue;
    if (!now.contains(key) || now.at(key) != value)
      std::cerr << "warning: resuming with " << key << " = " << (now.contains(key) ? now.at(key).dump() : "(unset)")
                << ", the checkpoint was trained with " << value.dump() << "; the run will not continue identically\n";
  }
}

}  // namespace

std::string CheckpointWriter::save(Communicator& comm, const core::Plan& plan, ParallelModel& pm,
                                   const Optimizers& optimizers, Manifest progress) const {
  const fs::path final_dir = fs::path(run_dir_) / step_dir_name(progress.step);
  const fs::path partial = fs::path(run_dir_) / (step_dir_name(progress.step) + ".partial");
  const int rank = comm.rank();
  if (rank == 0) {
    std::error_code ec;
    fs::remove_all(partial, ec);  // left by a crash during an earlier save of this step
    fs::create_directories(partial, ec);
    if (ec) throw core::UserError(partial.string() + ": cannot create the checkpoint directory (" + ec.message() + ")");
  }
  comm.barrier(comm.world());

  // This rank's shard.
  c10::Dict<std::string, torch::Tensor> dict;
  ShardInfo info;
  const core::Mesh& mesh = comm.mesh();
  info.rank = rank;
  info.dp = mesh.coord(rank, core::Axis::Dp);
  info.tp = mesh.coord(rank, core::Axis::Tp);
  info.pp = mesh.coord(rank, core::Axis::Pp);
  info.cp = mesh.coord(rank, core::Axis::Cp);
  info.file = shard_file(rank);
  info.state.emplace();
  for (size_t c = 0; c < pm.chunks.size(); ++c) {
    // Without ZeRO-1 the replicas (dp × cp) hold the same state: the first one writes it
    // and the others' shards hold their RNG state only.
    const bool replica_copy = !optimizers[c]->sharded() && (info.dp != 0 || info.cp != 0);
    const std::vector<FlatAdamW::StatePiece> pieces = optimizers[c]->state_pieces();
    for (const auto& slot : pm.chunks[c].flat->slots()) {
      info.tensors.push_back(slot.name);
      info.shapes[slot.name] = slot.param.sizes().vec();
      if (!replica_copy && insert_state(dict, slot, pieces)) info.state->push_back(slot.name);
    }
  }
  dict.insert("rng/cpu", at::detail::getDefaultCPUGenerator().get_state());
  const std::vector<char> bytes = torch::pickle_save(dict);
  info.bytes = static_cast<long long>(bytes.size());
  const std::string shard_path = (partial / info.file).string();
  maybe_die_mid_write(rank, progress.step, shard_path, bytes);
  core::write_file_atomically(shard_path, std::string(bytes.begin(), bytes.end()));

  // Rank 0 learns every shard's contents and, for resharding, how each parameter is split.
  nlohmann::json mine = tp_layout(pm);
  mine["shard"] = shard_to_json(info);
  const std::vector<std::string> infos = comm.gather_strings(mine.dump());
  if (rank == 0) {
    Manifest& m = progress;
    m.plan = plan.to_json();
    m.dp = mesh.size(core::Axis::Dp);
    m.tp = mesh.size(core::Axis::Tp);
    m.pp = mesh.size(core::Axis::Pp);
    m.cp = mesh.size(core::Axis::Cp);
    m.chunks = static_cast<int>(pm.chunks.size());
    m.tp_shard_dims.clear();
    m.vocabulary_rows.clear();
    m.shards.clear();
    for (const std::string& s : infos) {
      const auto j = nlohmann::json::parse(s);
      m.shards.push_back(shard_from_json(j.at("shard")));
      for (const auto& [name, dim] : j.at("tp_shard_dims").items()) m.tp_shard_dims[name] = dim.get<int>();
      for (const auto& [name, rows] : j.at("vocabulary_rows").items()) m.vocabulary_rows[name] = rows.get<std::int64_t>();
      const fs::path p = partial / m.shards.back().file;
      if (!fs::exists(p) || static_cast<long long>(fs::file_size(p)) != m.shards.back().bytes)
        throw core::UserError(p.string() + ": shard missing after the save - is " + run_dir_ +
                              " on a file system every rank shares?");
    }
    write_manifest(partial.string(), m);
    // The moment the checkpoint becomes visible as complete.
    std::error_code ec;
    fs::remove_all(final_dir, ec);
    fs::rename(partial, final_dir, ec);
    if (ec) throw core::UserError(final_dir.string() + ": cannot move the checkpoint into place (" + ec.message() + ")");
    core::sync_directory(run_dir_);
    core::write_file_atomically((fs::path(run_dir_) / "latest").string(), step_dir_name(progress.step) + "\n");
    prune();
  }
  comm.barrier(comm.world());
  return final_dir.string();
}

void CheckpointWriter::prune() const {
  if (keep_ <= 0) return;
  std::vector<fs::path> complete;
  for (const auto& entry : fs::directory_iterator(run_dir_)) {
    const std::string name = entry.path().filename().string();
    if (entry.is_directory() && name.rfind("step-", 0) == 0 && fs::exists(entry.path() / "manifest.json"))
      complete.push_back(entry.path());
  }
  std::sort(complete.begin(), complete.end());  // zero-padded step numbers sort in step order
  for (size_t i = 0; i + keep_ < complete.size(); ++i) {
    std::error_code ec;
    fs::remove_all(complete[i], ec);
  }
}

LoadedCheckpoint load_checkpoint(const std::string& path, Communicator& comm, const core::Plan& plan, ParallelModel& pm,
                         const Optimizers& optimizers) {
  const std::string dir = resolve_checkpoint(path);
  ShardReader reader(dir, read_manifest(dir));
  const Manifest& m = reader.manifest();
  const nlohmann::json now = plan.to_json();
  if (m.plan.value("model", "") != now.value("model", ""))
    throw core::UserError(dir + ": a checkpoint of a " + m.plan.value("model", "?") + " model; this plan trains a " +
                          now.value("model", "?") + " model");
  if (comm.rank() == 0) warn_about_plan_changes(m.plan, now);

  const core::Mesh& mesh = comm.mesh();
  const bool same_layout = m.dp == mesh.size(core::Axis::Dp) && m.tp == mesh.size(core::Axis::Tp) && m.pp == mesh.size(core::Axis::Pp) &&
                           m.cp == mesh.size(core::Axis::Cp) &&
                           m.chunks == static_cast<int>(pm.chunks.size());
  torch::NoGradGuard no_grad;
  for (size_t c = 0; c < pm.chunks.size(); ++c) {
    FlatParameters& flat = *pm.chunks[c].flat;
    FlatAdamW& opt = *optimizers[c];
    // The masters and moments laid out as the flat buffer (fp32), in host memory: on a
    // GPU these 12 bytes per parameter would come on top of the state (under ZeRO-1
    // several times its size) just to be cut into this rank's pieces.
    std::array<torch::Tensor, 3> buffers;
    for (torch::Tensor& b : buffers) b = torch::zeros({flat.grads().numel()}, torch::kFloat32);
    if (!same_layout || !fill_from_own_shard(reader, comm.rank(), flat, opt.pieces(), buffers))
      fill_from_shards(reader, *pm.chunks[c].model, flat, pm.tp, buffers);
    opt.load_state(buffers[0], buffers[1], buffers[2]);  // ZeRO-1: reads its pieces, gathers the rest
    opt.set_steps(m.step);
  }
  // The RNG streams belong to ranks; on another mesh they are not carried over.
  if (same_layout) {
    at::Generator cpu_generator = at::detail::getDefaultCPUGenerator();
    cpu_generator.set_state(reader.shard(comm.rank()).at("rng/cpu"));
  }
  comm.barrier(comm.world());
  return {m, !same_layout, reader.files_read(), reader.bytes_read()};
}

}  // namespace quintnet::exec
