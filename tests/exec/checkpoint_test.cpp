// Checkpoints of a 2x2x2 run: stopping after step 5 and resuming gives steps 6-10
// bit for bit equal to the uninterrupted run (the dp 1 ranks from the dp 0 ranks' state:
// one replica writes it); a rank killed in the middle of a save
// leaves the previous checkpoint loadable; the checkpoint continues on a 1x2x1 mesh
// (resharding) with matching losses; `quintnet checkpoint export` equals the
// parameters the run itself writes; damaged checkpoints are refused with a message.
// ZeRO-1 (masters and optimizer state split over dp, on disk too): resuming on the same
// mesh is bitwise, and its checkpoint continues on dp 4 and dp 1 with the uninterrupted
// run's losses.  Under bf16 weights a checkpoint holds the fp32 masters (each rank its
// pieces under ZeRO-1), and resuming is bitwise too.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <filesystem>
#include <fstream>
#include <map>

#include <unistd.h>

#include <nlohmann/json.hpp>

#include "common/run_command.h"

namespace {

namespace fs = std::filesystem;
using quintnet::testing_util::bin;
using quintnet::testing_util::CommandResult;
using quintnet::testing_util::run_command;
using quintnet::testing_util::write_file;

// `extra`: more plan lines.
std::string plan(const std::string& name, const std::string& mesh, const std::string& extra = "") {
  return write_file(name + "_" + std::to_string(getpid()) + ".yaml",
                    "batch_size: 32\ngrad_acc_steps: 2\nlearning_rate: 1e-3\nimg_size: 28\npatch_size: 4\n"
                    "hidden_dim: 64\nn_heads: 4\ndepth: 8\nmesh_dim: " + mesh +
                        "\nmesh_name: ['dp', 'tp', 'pp']\nschedule: 1f1b\n" + extra);
}

// Each test is its own process under ctest -j and builds its own reference run: the
// folders carry the process id so two of them never share one.
std::string dir_for(const std::string& name) {
  const std::string d = ::testing::TempDir() + "/ckpt_" + std::to_string(getpid()) + "_" + name;
  fs::remove_all(d);
  fs::create_directories(d);
  return d;
}

// Runs quintnet-train on `nproc` ranks (10 planned steps); `extra` adds options.
CommandResult train(const std::string& config, int nproc, const std::string& extra, const std::string& env = "") {
  return run_command(env + " " + bin("quintnet-launch") + " --nproc " + std::to_string(nproc) + " -- " +
                     bin("quintnet-train") + " --config " + config +
                     " --max-steps 10 --no-eval --quiet --threads 1 " + extra);
}

std::vector<double> losses(const std::string& metrics) {
  std::vector<double> out;
  std::ifstream in(metrics);
  for (std::string line; std::getline(in, line);) out.push_back(nlohmann::json::parse(line)["loss"].get<double>());
  return out;
}

std::map<std::string, torch::Tensor> load_params(const std::vector<std::string>& paths) {
  std::map<std::string, torch::Tensor> out;
  for (const auto& path : paths) {
    std::ifstream in(path, std::ios::binary);
    std::vector<char> bytes((std::istreambuf_iterator<char>(in)), {});
    EXPECT_FALSE(bytes.empty()) << path;
    if (!bytes.empty())
      for (const auto& kv : torch::pickle_load(bytes).toGenericDict())
        out[kv.key().toStringRef()] = kv.value().toTensor();
  }
  return out;
}

// The losses of `config`'s uninterrupted 10 steps, and in d/run the checkpoint of the
// same run stopped after step 5: what a resume test continues from.
std::vector<double> straight_losses_and_checkpoint_at_five(const std::string& config, int nproc, const std::string& d) {
  auto straight = train(config, nproc, "--metrics " + d + "/ref.jsonl");
  EXPECT_EQ(straight.code, 0) << straight.err;
  auto first = train(config, nproc, "--checkpoint-dir " + d + "/run --checkpoint-every 5 --stop-at-step 5");
  EXPECT_EQ(first.code, 0) << first.err;
  return losses(d + "/ref.jsonl");
}

// The uninterrupted 2x2x2 run: 10 steps, a checkpoint at the end, its parameters.
struct Reference {
  std::string dir, config;
  std::vector<double> losses;
};
const Reference& reference() {
  static const Reference r = [] {
    Reference ref{dir_for("reference"), plan("ckpt_3d", "[2, 2, 2]"), {}};
    auto res = train(ref.config, 8,
                     "--metrics " + ref.dir + "/m.jsonl --checkpoint-dir " + ref.dir + "/run --save-params " + ref.dir +
                         "/final.pt");
    EXPECT_EQ(res.code, 0) << res.err;
    ref.losses = losses(ref.dir + "/m.jsonl");
    return ref;
  }();
  return r;
}

TEST(Checkpoint, ResumeAfterStepFiveContinuesBitwise) {
  const Reference& ref = reference();
  ASSERT_EQ(ref.losses.size(), 10u);
  const std::string d = dir_for("resume");
  auto first = train(ref.config, 8, "--metrics " + d + "/a.jsonl --checkpoint-dir " + d + "/run --checkpoint-every 5 --stop-at-step 5");
  ASSERT_EQ(first.code, 0) << first.err;
  EXPECT_NE(first.out.find("stopped after step 5 of 10"), std::string::npos) << first.out;
  // The dp 1 replicas' shards hold their RNG state only (their parameters and moments are
  // the dp 0 ranks'): so the dp 1 ranks below resume from their peers' shards.
  const nlohmann::json manifest = nlohmann::json::parse(std::ifstream(d + "/run/step-00000005/manifest.json"));
  int replicas = 0;
  for (const auto& shard : manifest.at("shards")) {
    const auto saved = load_params({d + "/run/step-00000005/" + shard.at("file").get<std::string>()});
    if (shard.at("dp").get<int>() == 0) {
      EXPECT_GT(saved.size(), 10u) << shard.at("file");
      continue;
    }
    ++replicas;
    EXPECT_EQ(saved.size(), 1u) << shard.at("file");
    EXPECT_TRUE(saved.count("rng/cpu")) << shard.at("file");
  }
  EXPECT_EQ(replicas, 4);
  auto second = train(ref.config, 8, "--metrics " + d + "/b.jsonl --resume " + d + "/run --save-params " + d + "/final.pt");
  ASSERT_EQ(second.code, 0) << second.err;
  EXPECT_NE(second.out.find("resumed from"), std::string::npos) << second.out;
  const auto a = losses(d + "/a.jsonl"), b = losses(d + "/b.jsonl");
  ASSERT_EQ(a.size(), 5u);
  ASSERT_EQ(b.size(), 5u);
  for (int i = 0; i < 5; ++i) EXPECT_EQ(a[i], ref.losses[i]) << "step " << i + 1;
  for (int i = 0; i < 5; ++i) EXPECT_EQ(b[i], ref.losses[5 + i]) << "step " << i + 6 << " after resuming";
  const auto resumed = load_params({d + "/final.pt.pp0", d + "/final.pt.pp1"});
  const auto straight = load_params({ref.dir + "/final.pt.pp0", ref.dir + "/final.pt.pp1"});
  ASSERT_EQ(resumed.size(), straight.size());
  for (const auto& [name, t] : straight) EXPECT_TRUE(torch::equal(resumed.at(name), t)) << name;
}

TEST(Checkpoint, RankKilledDuringSaveLeavesPreviousCheckpointLoadable) {
  const Reference& ref = reference();
  const std::string d = dir_for("killed");
  auto killed = train(ref.config, 8, "--metrics " + d + "/a.jsonl --checkpoint-dir " + d + "/run --checkpoint-every 5",
                      "QN_FAULT_KILL_IN_SAVE=3:10");
  EXPECT_NE(killed.code, 0);
  EXPECT_NE(killed.err.find("rank 3"), std::string::npos) << killed.err;
  std::ifstream latest(d + "/run/latest");
  std::string name;
  std::getline(latest, name);
  EXPECT_EQ(name, "step-00000005");
  EXPECT_FALSE(fs::exists(d + "/run/step-00000010"));
  EXPECT_TRUE(fs::exists(d + "/run/step-00000010.partial"));  // what the crash left; nothing loads it
  auto resumed = train(ref.config, 8, "--metrics " + d + "/b.jsonl --resume " + d + "/run");
  ASSERT_EQ(resumed.code, 0) << resumed.err;
  const auto b = losses(d + "/b.jsonl");
  ASSERT_EQ(b.size(), 5u);
  for (int i = 0; i < 5; ++i) EXPECT_EQ(b[i], ref.losses[5 + i]) << "step " << i + 6;
}

TEST(Checkpoint, ReshardedOntoOneByTwoByOneMatchesLosses) {
  const Reference& ref = reference();
  const std::string d = dir_for("reshard");
  auto first = train(ref.config, 8, "--checkpoint-dir " + d + "/run --checkpoint-every 5 --stop-at-step 5");
  ASSERT_EQ(first.code, 0) << first.err;
  auto second = train(plan("ckpt_tp2", "[1, 2, 1]"), 2, "--metrics " + d + "/b.jsonl --resume " + d + "/run");
  ASSERT_EQ(second.code, 0) << second.err;
  const auto b = losses(d + "/b.jsonl");
  ASSERT_EQ(b.size(), 5u);
  for (int i = 0; i < 5; ++i) EXPECT_NEAR(b[i], ref.losses[5 + i], 1e-5 * ref.losses[5 + i]) << "step " << i + 6;
}

TEST(Checkpoint, ExportMergesShardsIntoTheSerialParameters) {
  const Reference& ref = reference();
  const std::string out = ref.dir + "/export.pt";
  auto r = run_command(bin("quintnet-checkpoint") + " export " + ref.dir + "/run -o " + out);
  ASSERT_EQ(r.code, 0) << r.err;
  const auto exported = load_params({out});
  const auto saved = load_params({ref.dir + "/final.pt.pp0", ref.dir + "/final.pt.pp1"});
  ASSERT_EQ(exported.size(), saved.size());
  for (const auto& [name, t] : saved) {
    ASSERT_TRUE(exported.count(name)) << name;
    EXPECT_TRUE(torch::equal(exported.at(name), t)) << name;
  }
  auto info = run_command(bin("quintnet-checkpoint") + " info " + ref.dir + "/run");
  EXPECT_EQ(info.code, 0);
  EXPECT_NE(info.out.find("step 10 of 10"), std::string::npos) << info.out;
  EXPECT_NE(info.out.find("dp=2 x tp=2 x pp=2"), std::string::npos) << info.out;
}

TEST(Checkpoint, DamagedCheckpointsAreRefusedWithAMessage) {
  const Reference& ref = reference();
  const std::string d = dir_for("damaged");
  fs::copy(ref.dir + "/run/step-00000010", d + "/truncated", fs::copy_options::recursive);
  fs::resize_file(d + "/truncated/rank-00001.pt", 100);
  auto r = run_command(bin("quintnet-checkpoint") + " export " + d + "/truncated -o " + d + "/x.pt");
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.err.find("rank-00001.pt"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("truncated"), std::string::npos) << r.err;
  auto resumed = train(ref.config, 8, "--resume " + d + "/truncated");
  EXPECT_NE(resumed.code, 0);
  EXPECT_NE(resumed.err.find("truncated"), std::string::npos) << resumed.err;

  fs::create_directories(d + "/empty");
  r = run_command(bin("quintnet-checkpoint") + " info " + d + "/empty");
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.err.find("not a checkpoint"), std::string::npos) << r.err;

  fs::copy(ref.dir + "/run/step-00000010", d + "/garbled", fs::copy_options::recursive);
  std::ofstream(d + "/garbled/manifest.json") << "{\"format\": \"quintnet-checkpoint\", \"version\": 1, \"step\": \"x\"}";
  r = run_command(bin("quintnet-checkpoint") + " info " + d + "/garbled");
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.err.find("'step'"), std::string::npos) << r.err;

  // A checkpoint from a later QuintNet: its version named, and the ones this one reads.
  std::ofstream(d + "/garbled/manifest.json") << "{\"format\": \"quintnet-checkpoint\", \"version\": 3}";
  r = run_command(bin("quintnet-checkpoint") + " info " + d + "/garbled");
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.err.find("version 3; this QuintNet reads versions 1 to 2"), std::string::npos) << r.err;
}

// zero_stage 1 on dp 2, with buckets of 50 kB (the ViT has ~1.6 MB of parameters, so
// every rank's pieces span ~30 buckets).  Each rank's shard stores the moments of its own
// pieces; the checkpoint resumes bit for bit on dp 2 and, reassembled, continues on dp 4
// and dp 1.
TEST(Checkpoint, ZeroOneResumesBitwiseAndReshardsOntoDp4AndDp1) {
  const std::string zero = "zero_stage: 1\nbucket_size_mb: 0.05\n";
  const std::string config = plan("ckpt_zero_dp2", "[2, 1, 1]", zero);
  const std::string d = dir_for("zero");
  const auto ref = straight_losses_and_checkpoint_at_five(config, 2, d);
  ASSERT_EQ(ref.size(), 10u);
  // On disk the state stays sharded: the two shards hold the parameters and the two
  // moments once (3 parameter sizes, as without ZeRO-1 where dp 0 writes them all; before
  // session 34 the parameters twice: 4), and `export --with-optimizer` reassembles them.
  std::uintmax_t shard_bytes = 0;
  for (const auto& e : fs::directory_iterator(d + "/run/step-00000005"))
    if (e.path().extension() == ".pt") shard_bytes += fs::file_size(e.path());
  auto params = run_command(bin("quintnet-checkpoint") + " export " + d + "/run -o " + d + "/params.pt");
  ASSERT_EQ(params.code, 0) << params.err;
  auto whole = run_command(bin("quintnet-checkpoint") + " export " + d + "/run --with-optimizer -o " + d + "/whole.pt");
  ASSERT_EQ(whole.code, 0) << whole.err;
  const double param_bytes = static_cast<double>(fs::file_size(d + "/params.pt"));
  EXPECT_GT(shard_bytes, 2.9 * param_bytes);
  EXPECT_LT(shard_bytes, 3.3 * param_bytes);
  EXPECT_GT(static_cast<double>(fs::file_size(d + "/whole.pt")), 2.9 * param_bytes);
  auto again = train(config, 2, "--metrics " + d + "/dp2.jsonl --resume " + d + "/run");
  ASSERT_EQ(again.code, 0) << again.err;
  const auto dp2 = losses(d + "/dp2.jsonl");
  ASSERT_EQ(dp2.size(), 5u);
  for (int i = 0; i < 5; ++i) EXPECT_EQ(dp2[i], ref[5 + i]) << "step " << i + 6 << " resumed on dp 2";
  // On dp 2 with other pieces (buckets of 200 kB) or none (ZeRO-1 off), a rank's own shard
  // does not hold what it owns: it reassembles from its dp group's.
  for (const std::string& other : {std::string("zero_stage: 1\nbucket_size_mb: 0.2\n"), std::string("")}) {
    auto r = train(plan("ckpt_zero_pieces", "[2, 1, 1]", other), 2, "--metrics " + d + "/pieces.jsonl --resume " + d + "/run");
    ASSERT_EQ(r.code, 0) << other << r.err;
    const auto b = losses(d + "/pieces.jsonl");
    ASSERT_EQ(b.size(), 5u) << other;
    for (int i = 0; i < 5; ++i) EXPECT_NEAR(b[i], ref[5 + i], 1e-5 * ref[5 + i]) << other << " step " << i + 6;
  }
  for (const auto& [mesh, nproc] : {std::pair<std::string, int>{"[4, 1, 1]", 4}, {"[1, 1, 1]", 1}}) {
    auto other = train(plan("ckpt_zero_other", mesh, zero), nproc, "--metrics " + d + "/other.jsonl --resume " + d + "/run");
    ASSERT_EQ(other.code, 0) << mesh << other.err;
    const auto b = losses(d + "/other.jsonl");
    ASSERT_EQ(b.size(), 5u) << mesh;
    for (int i = 0; i < 5; ++i) EXPECT_NEAR(b[i], ref[5 + i], 1e-5 * ref[5 + i]) << mesh << " step " << i + 6;
  }
}

// precision: bf16_weights on dp 2: the checkpoint stores the fp32 masters and the resumed
// run recomputes its bf16 weights from them, so steps 6-10 are the uninterrupted run's
// bit for bit (weights left as initialised, or the masters rounded to bf16, would not be).
TEST(Checkpoint, Bf16WeightsResumeBitwiseFromTheFp32Masters) {
  const std::string config = plan("ckpt_bf16w", "[2, 1, 1]", "precision: bf16_weights\n");
  const std::string d = dir_for("bf16w");
  const auto ref = straight_losses_and_checkpoint_at_five(config, 2, d);
  ASSERT_EQ(ref.size(), 10u);
  const auto saved = load_params({d + "/run/step-00000005/rank-00000.pt"});
  ASSERT_TRUE(saved.count("param/head.weight"));
  EXPECT_EQ(saved.at("param/head.weight").scalar_type(), torch::kFloat32);
  auto again = train(config, 2, "--metrics " + d + "/resumed.jsonl --resume " + d + "/run");
  ASSERT_EQ(again.code, 0) << again.err;
  const auto resumed = losses(d + "/resumed.jsonl");
  ASSERT_EQ(resumed.size(), 5u);
  for (int i = 0; i < 5; ++i) EXPECT_EQ(resumed[i], ref[5 + i]) << "step " << i + 6 << " after resuming";
}

// The elements of the "param/" entries in one shard: what it holds of the masters.
std::int64_t master_elements(const std::string& shard) {
  std::int64_t n = 0;
  for (const auto& [key, t] : load_params({shard}))
    if (key.rfind("param/", 0) == 0) n += t.numel();
  return n;
}

// ZeRO-1 under bf16 weights: a step gathers the updated pieces as bf16 weights only (half
// the bytes of the fp32 masters), and each rank writes only its pieces of the masters to
// its shard.  So the run is the dp 2 run without ZeRO-1 bit for bit (two gradients add up
// alike either way); the two shards hold the masters once between them, and reassembled
// (`quintnet-checkpoint export`) they are that run's to the bit (a rank's stale pieces, or
// pieces put back in the wrong place, would differ); resuming is bitwise.  Without
// clipping: under ZeRO-1 the gradient norm sums other ranges (each rank's pieces), and on
// LibTorch 2.15 its last bits differ (measured; clipping at 1.0 then moves the losses by 1e-4).
TEST(Checkpoint, Bf16WeightsUnderZeroOneShardTheMastersOnDisk) {
  // Buckets of 50 kB: each rank's masters in ~30 pieces, each in its place.
  const std::string plain = "precision: bf16_weights\nmax_grad_norm: 0\nbucket_size_mb: 0.05\n";
  const std::string whole = plan("ckpt_bf16w_dp2", "[2, 1, 1]", plain);
  const std::string sharded = plan("ckpt_bf16w_zero", "[2, 1, 1]", plain + "zero_stage: 1\n");
  const std::string dw = dir_for("bf16w_dp2"), dz = dir_for("bf16w_zero");
  const auto ref = straight_losses_and_checkpoint_at_five(whole, 2, dw);
  const auto zero = straight_losses_and_checkpoint_at_five(sharded, 2, dz);
  ASSERT_EQ(ref.size(), 10u);
  ASSERT_EQ(zero.size(), 10u);
  for (int i = 0; i < 10; ++i) EXPECT_EQ(zero[i], ref[i]) << "step " << i + 1;

  const std::int64_t all = master_elements(dw + "/run/step-00000005/rank-00000.pt");
  const std::int64_t first = master_elements(dz + "/run/step-00000005/rank-00000.pt");
  const std::int64_t second = master_elements(dz + "/run/step-00000005/rank-00001.pt");
  EXPECT_EQ(first + second, all) << "the masters are not held once between the two shards";
  EXPECT_LT(first, 0.6 * static_cast<double>(all));
  EXPECT_LT(second, 0.6 * static_cast<double>(all));

  for (const std::string& d : {dw, dz}) {
    auto exported = run_command(bin("quintnet-checkpoint") + " export " + d + "/run -o " + d + "/masters.pt");
    ASSERT_EQ(exported.code, 0) << exported.err;
  }
  const auto expected = load_params({dw + "/masters.pt"});
  const auto reassembled = load_params({dz + "/masters.pt"});
  ASSERT_GT(expected.size(), 10u);
  for (const auto& [name, t] : expected) {
    ASSERT_TRUE(reassembled.count(name)) << name;
    EXPECT_EQ(reassembled.at(name).scalar_type(), torch::kFloat32) << name;
    EXPECT_TRUE(torch::equal(reassembled.at(name), t)) << name << ": masters not reassembled as written";
  }

  auto again = train(sharded, 2, "--metrics " + dz + "/resumed.jsonl --resume " + dz + "/run");
  ASSERT_EQ(again.code, 0) << again.err;
  EXPECT_NE((again.out + again.err).find("gathered as bf16 weights"), std::string::npos) << again.out << again.err;
  const auto resumed = losses(dz + "/resumed.jsonl");
  ASSERT_EQ(resumed.size(), 5u);
  for (int i = 0; i < 5; ++i) EXPECT_EQ(resumed[i], ref[5 + i]) << "step " << i + 6 << " after resuming";
}

}  // namespace

#include "exec/checkpoint/manifest.h"
#include "exec/checkpoint/shard_reader.h"

// A checkpoint of format version 1 (before session 34), made from a version-2 one as that
// format wrote it: under ZeRO-1 every shard held the masters whole, only the moments in
// pieces, and the manifest recorded no shapes.  It resumes on its own mesh bitwise and on
// tp 4 and dp 4 with the uninterrupted run's losses: what a pieces-only reader (no shapes
// to know which shards to open) or one counting each replica's whole masters again (then
// 2×2 times the values) would not.
TEST(Checkpoint, VersionOneCheckpointsStillLoadAndReshard) {
  using namespace quintnet::exec;
  const std::string zero = "zero_stage: 1\nbucket_size_mb: 0.05\n";
  const std::string config = plan("ckpt_v1", "[2, 2, 1]", zero);
  const std::string d = dir_for("v1");
  const auto ref = straight_losses_and_checkpoint_at_five(config, 4, d);
  ASSERT_EQ(ref.size(), 10u);
  const std::string step = d + "/run/step-00000005";
  ShardReader reader(step, read_manifest(step));
  nlohmann::json manifest = nlohmann::json::parse(std::ifstream(step + "/manifest.json"));
  std::vector<std::vector<char>> rewritten;
  for (const ShardInfo& s : reader.manifest().shards) {
    c10::Dict<std::string, torch::Tensor> dict;
    for (const auto& [key, value] : reader.shard(s.rank))
      if (key.rfind("param/", 0) != 0) dict.insert(key, value);
    for (const std::string& name : s.tensors) dict.insert("param/" + name, reader.tensor(s.rank, "param/", name).clone());
    rewritten.push_back(torch::pickle_save(dict));
  }
  for (size_t r = 0; r < rewritten.size(); ++r) {
    const std::string file = reader.shard_path(static_cast<int>(r));
    std::ofstream(file, std::ios::binary | std::ios::trunc).write(rewritten[r].data(), static_cast<std::streamsize>(rewritten[r].size()));
    manifest["shards"][r]["bytes"] = rewritten[r].size();
    manifest["shards"][r].erase("shapes");
    manifest["shards"][r].erase("state");
  }
  manifest["version"] = 1;
  manifest.erase("vocabulary_rows");
  std::ofstream(step + "/manifest.json", std::ios::trunc) << manifest.dump();
  for (const auto& [mesh, nproc] : {std::pair<std::string, int>{"[2, 2, 1]", 4}, {"[1, 4, 1]", 4}, {"[4, 1, 1]", 4}}) {
    auto r = train(plan("ckpt_v1_on", mesh, zero), nproc, "--metrics " + d + "/on.jsonl --resume " + d + "/run");
    ASSERT_EQ(r.code, 0) << mesh << r.err;
    const auto b = losses(d + "/on.jsonl");
    ASSERT_EQ(b.size(), 5u) << mesh;
    for (int i = 0; i < 5; ++i) {
      if (mesh == "[2, 2, 1]") {
        EXPECT_EQ(b[i], ref[5 + i]) << mesh << " step " << i + 6;
      }
      EXPECT_NEAR(b[i], ref[5 + i], 1e-5 * ref[5 + i]) << mesh << " step " << i + 6;
    }
  }
}
