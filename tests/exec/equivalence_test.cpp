// Parallel ViT training against the serial run: the same initial weights and data,
// per-step losses within 1e-5 relative over 10 steps (per-microbatch losses too when
// dp = 1), the same parameters after them.  DP=2, TP=2, DP×TP=2×2, PP=2 with AFAB,
// 1F1B and ZB-H1, PP=4 1F1B, interleaved (pp 2, v 2) and the full 2×2×2 3D mesh (also
// over Gloo alone and through the store backend); and one rank computing its microbatches side by side on
// two threads.
// Ranks are real processes started by quintnet-launch.
#include <gtest/gtest.h>
#include <torch/torch.h>
#include <torch/version.h>

#include <fstream>
#include <unistd.h>
#include <map>

#include <nlohmann/json.hpp>

#include "common/run_command.h"

namespace {

using quintnet::testing_util::bin;
using quintnet::testing_util::run_command;
using quintnet::testing_util::write_file;

struct Outcome {
  std::vector<double> losses;
  std::vector<std::vector<double>> mb_losses;  // per step
  std::map<std::string, torch::Tensor> params;
  std::string log;  // rank 0's standard output
};

void load_params(const std::string& path, std::map<std::string, torch::Tensor>& into) {
  std::ifstream in(path, std::ios::binary);
  std::vector<char> bytes((std::istreambuf_iterator<char>(in)), {});
  if (!bytes.empty())
    for (const auto& kv : torch::pickle_load(bytes).toGenericDict())
      into[kv.key().toStringRef()] = kv.value().toTensor();
}

// `extra`: more plan lines (e.g. "recompute: full\n"); `env`: variables for the ranks.
Outcome train(const std::string& name, const std::string& mesh, int nproc, int microbatches = 2,
              const std::string& schedule = "1f1b", int chunks = 1, const std::string& threads = "--threads 1",
              const std::string& extra = "", const std::string& env = "") {
  const std::string config = write_file(
      name + std::to_string(getpid()) + ".yaml", "batch_size: 32\ngrad_acc_steps: " + std::to_string(microbatches) +
                          "\nlearning_rate: 1e-4\nmax_grad_norm: 1.0\nimg_size: 28\npatch_size: 4\nhidden_dim: 64\n"
                          "n_heads: 4\ndepth: 8\nmesh_dim: " + mesh + "\nmesh_name: ['dp', 'tp', 'pp']\nschedule: " +
                          schedule + "\nvirtual_stages: " + std::to_string(chunks) + "\n" + extra);
  // This process's own files: ctest -j runs several tests that train the same reference.
  const std::string dir = ::testing::TempDir() + "/eq" + std::to_string(getpid()) + "_";
  const std::string cmd = env + bin("quintnet-launch") + " --nproc " + std::to_string(nproc) + " -- " + bin("quintnet-train") +
                          " --config " + config + " --max-steps 10 --no-eval --quiet " + threads + " --metrics " + dir +
                          name + ".jsonl --save-params " + dir + name + ".pt";
  auto r = run_command(cmd);
  EXPECT_EQ(r.code, 0) << cmd << "\n" << r.err;
  Outcome o;
  o.log = r.out;
  std::ifstream metrics(dir + name + ".jsonl");
  for (std::string line; std::getline(metrics, line);) {
    auto j = nlohmann::json::parse(line);
    o.losses.push_back(j["loss"].get<double>());
    o.mb_losses.push_back(j["mb_losses"].get<std::vector<double>>());
  }
  // One parameter file, or one per pipeline rank.
  load_params(dir + name + ".pt", o.params);
  for (int r = 0; r < 8; ++r) load_params(dir + name + ".pt.pp" + std::to_string(r), o.params);
  return o;
}

void expect_equivalent(const Outcome& serial, const Outcome& parallel, const std::string& what,
                       bool same_microbatches = false) {
  ASSERT_EQ(serial.losses.size(), 10u);
  ASSERT_EQ(parallel.losses.size(), 10u) << what;
  for (size_t i = 0; i < serial.losses.size(); ++i) {
    EXPECT_NEAR(parallel.losses[i], serial.losses[i], 1e-5 * std::abs(serial.losses[i]))
        << what << " step " << i + 1;
    if (same_microbatches) {  // dp = 1: microbatch j holds the same samples as the serial run's
      ASSERT_EQ(parallel.mb_losses[i].size(), serial.mb_losses[i].size()) << what;
      for (size_t j = 0; j < serial.mb_losses[i].size(); ++j)
        EXPECT_NEAR(parallel.mb_losses[i][j], serial.mb_losses[i][j], 1e-5 * serial.mb_losses[i][j])
            << what << " step " << i + 1 << " microbatch " << j;
    }
  }
  ASSERT_EQ(parallel.params.size(), serial.params.size()) << what;
  double worst = 0;
  for (const auto& [name, serial_t] : serial.params) {
    ASSERT_TRUE(parallel.params.count(name)) << what << " lacks " << name;
    torch::Tensor p = parallel.params.at(name), t = serial_t;
    if (name.size() > 13 && name.compare(name.size() - 13, 13, "attn.qkv.bias") == 0) {
      p = torch::stack({p[0], p[2]});  // query and value biases only: see below
      t = torch::stack({t[0], t[2]});
    }
    ASSERT_EQ(p.sizes(), t.sizes()) << what << " " << name;
    worst = std::max(worst, (p - t).abs().max().item<double>());
  }
  // Not compared: the key bias (row 1 of attn.qkv.bias, [3, d]).  Its exact gradient is
  // zero — q·(k + b) shifts every score of a query by the same q·b, which softmax
  // ignores — so what it receives is round-off, and AdamW's normalised step turns any
  // round-off into moves of about ±lr.  Another BLAS (the torch 2.x wheel's) rounds
  // differently and those moves differ by 1.1e-5 after 10 steps at tp 2, while the rest
  // agrees to 1e-8 (one value weight, its gradient near zero too, to 5e-6).
  EXPECT_LT(worst, 1e-5) << what << ": largest parameter difference after 10 steps";
}

// The serial reference with m microbatches, trained once per process on first use
// (ctest runs each test in its own process).
const Outcome& serial(int microbatches) {
  static std::map<int, Outcome> cache;
  auto it = cache.find(microbatches);
  if (it == cache.end())
    it = cache.emplace(microbatches, train("serial_m" + std::to_string(microbatches), "[1, 1, 1]", 1, microbatches))
             .first;
  return it->second;
}

TEST(Equivalence, SerialLossFalls) {
  ASSERT_EQ(serial(2).losses.size(), 10u);
  EXPECT_LT(serial(2).losses.back(), serial(2).losses.front());
}

TEST(Equivalence, DataParallel2MatchesSerial) { expect_equivalent(serial(2), train("dp2", "[2, 1, 1]", 2), "dp=2"); }

TEST(Equivalence, TensorParallel2MatchesSerial) { expect_equivalent(serial(2), train("tp2", "[1, 2, 1]", 2), "tp=2"); }

TEST(Equivalence, DataTimesTensorParallel2x2MatchesSerial) {
  expect_equivalent(serial(2), train("dp2tp2", "[2, 2, 1]", 4), "dp=2 x tp=2");
}

TEST(Equivalence, Pipeline2AfabMatchesSerial) {
  expect_equivalent(serial(4), train("pp2_afab", "[1, 1, 2]", 2, 4, "afab"), "pp=2 afab", true);
}

TEST(Equivalence, Pipeline2OneFOneBMatchesSerial) {
  expect_equivalent(serial(4), train("pp2_1f1b", "[1, 1, 2]", 2, 4, "1f1b"), "pp=2 1f1b", true);
}

TEST(Equivalence, Pipeline2ZeroBubbleMatchesSerial) {
  expect_equivalent(serial(4), train("pp2_zb", "[1, 1, 2]", 2, 4, "zb-h1"), "pp=2 zb-h1", true);
}

TEST(Equivalence, Pipeline4OneFOneBMatchesSerial) {
  expect_equivalent(serial(4), train("pp4_1f1b", "[1, 1, 4]", 4, 4, "1f1b"), "pp=4 1f1b", true);
}

TEST(Equivalence, InterleavedPipeline2x2ChunksMatchesSerial) {
  expect_equivalent(serial(4), train("pp2_v2", "[1, 1, 2]", 2, 4, "interleaved", 2), "interleaved pp=2 v=2", true);
}

// Two threads, four microbatches: two rounds of two side by side.  Each microbatch is
// computed as the sequential loop at one thread computes it, and the gradients are added
// in the same order, so the first step's microbatch losses are bitwise the serial ones;
// later steps may differ by the two-thread gradient norm's rounding (clipping).
TEST(Equivalence, MicrobatchesSideBySideMatchSerial) {
  const Outcome side_by_side = train("serial_side_by_side", "[1, 1, 1]", 1, 4, "1f1b", 1, "--threads 2");
  ASSERT_NE(side_by_side.log.find("microbatches: 2 side by side"), std::string::npos) << side_by_side.log;
  ASSERT_FALSE(side_by_side.mb_losses.empty());
  EXPECT_EQ(side_by_side.mb_losses[0], serial(4).mb_losses[0]);
  expect_equivalent(serial(4), side_by_side, "microbatches side by side", true);
}

// By default the collectives and pipeline messages of ranks on one host go through shared memory
// (exec/comm/shm_backend.h); QN_COMM_BACKEND=gloo keeps every byte on Gloo's TCP.
TEST(Equivalence, Full3D2x2x2MatchesSerial) {
  const Outcome shared = train("dp2tp2pp2", "[2, 2, 2]", 8);
  EXPECT_NE(shared.log.find("communication: shared memory (one host) for the collectives of dp, pp, tp, world and the messages of pp;"),
            std::string::npos) << shared.log;
  expect_equivalent(serial(2), shared, "dp=2 x tp=2 x pp=2");
}

TEST(Equivalence, Full3D2x2x2OverGlooAloneMatchesSerial) {
  const Outcome gloo = train("dp2tp2pp2_gloo", "[2, 2, 2]", 8, 2, "1f1b", 1, "--threads 1", "", "QN_COMM_BACKEND=gloo ");
  EXPECT_NE(gloo.log.find("communication: Gloo over TCP\n"), std::string::npos) << gloo.log;
  expect_equivalent(serial(2), gloo, "dp=2 x tp=2 x pp=2 over Gloo alone");
}

// recompute: full — each transformer block keeps only its input and runs its forward
// again inside the backward (under ZB-H1 in BI for the input gradient and again in BW for
// the weights'): the same losses and parameters as the serial run on 1F1B, ZB-H1 and 2x2x2.
// The backend of ranks that share a GPU (exec/comm/store_backend.h: NCCL refuses them),
// here on the CPU in Gloo's place: every collective and pipeline message of a 3D mesh
// with ZeRO-1's reduce-scatter through host memory and the rendezvous store.
TEST(Equivalence, StoreBackendMatchesSerial) {
  const Outcome store = train("dp2tp2pp2_store", "[2, 2, 2]", 8, 2, "1f1b", 1, "--threads 1", "zero_stage: 1\n",
                              "QN_COMM_BACKEND=store ");
  EXPECT_NE(store.log.find("through host memory"), std::string::npos) << store.log;
  expect_equivalent(serial(2), store, "dp=2 x tp=2 x pp=2 through the store");
}

TEST(Equivalence, RecomputationMatchesSerialOnEverySchedule) {
  const std::string full = "recompute: full\n";
  const Outcome pp2 = train("pp2_1f1b_rc", "[1, 1, 2]", 2, 4, "1f1b", 1, "--threads 1", full);
  expect_equivalent(serial(4), pp2, "pp=2 1f1b recompute", true);
  // Rank 0 (stage 0: blocks 0-3) recomputed 4 blocks for each of 4 microbatches in 10 steps.
  EXPECT_NE(pp2.log.find("activations: 160 blocks recomputed"), std::string::npos) << pp2.log;
  expect_equivalent(serial(4), train("pp2_zb_rc", "[1, 1, 2]", 2, 4, "zb-h1", 1, "--threads 1", full),
                    "pp=2 zb-h1 recompute", true);
  expect_equivalent(serial(2), train("dp2tp2pp2_rc", "[2, 2, 2]", 8, 2, "1f1b", 1, "--threads 1", full),
                    "dp=2 x tp=2 x pp=2 recompute");
}

// recompute: selective — the attention cores keep q, k and v, not their softmax, and
// compute it again in the backward: the serial run's losses and parameters on 1F1B,
// ZB-H1 and 2x2x2.  (Under ZB-H1 a later stage recomputes in BI and again in BW, which
// walks the graph BI kept; stage 0 has no input gradient, so only its BW runs.)
TEST(Equivalence, SelectiveRecomputationMatchesSerialOnEverySchedule) {
  const std::string selective = "recompute: selective\n";
  const Outcome pp2 = train("pp2_1f1b_sel", "[1, 1, 2]", 2, 4, "1f1b", 1, "--threads 1", selective);
  expect_equivalent(serial(4), pp2, "pp=2 1f1b selective", true);
  // Rank 0 (stage 0: blocks 0-3) recomputed 4 attention cores for each of 4 microbatches in 10 steps.
  EXPECT_NE(pp2.log.find("activations: 160 attention cores recomputed"), std::string::npos) << pp2.log;
  const Outcome zb = train("pp2_zb_sel", "[1, 1, 2]", 2, 4, "zb-h1", 1, "--threads 1", selective);
  expect_equivalent(serial(4), zb, "pp=2 zb-h1 selective", true);
  EXPECT_NE(zb.log.find("activations: 160 attention cores recomputed"), std::string::npos) << zb.log;
  expect_equivalent(serial(2), train("dp2tp2pp2_sel", "[2, 2, 2]", 8, 2, "1f1b", 1, "--threads 1", selective),
                    "dp=2 x tp=2 x pp=2 selective");
}

// The optimizer state this rank's log reports ("optimizer state: N bytes ..."), or -1.
double optimizer_state_bytes(const Outcome& o) {
  const std::string key = "optimizer state: ";
  const size_t at = o.log.find(key);
  return at == std::string::npos ? -1 : std::stod(o.log.substr(at + key.size()));
}

// zero_stage 1 — each dp rank keeps AdamW's moments for its pieces of every gradient
// bucket, updates those parameters and all-gathers the others: the serial run's losses
// and parameters on dp 2 (one bucket, and ~30 buckets of 50 kB), dp 2 x tp 2 and 2x2x2,
// and on 2x2x2 together with selective recomputation.  A dp 2 rank holds half of the
// moments a dp 1 run holds.  The gradients are reduce-scattered (through shared memory,
// or LibTorch 2's Gloo), so each rank has only its pieces' averages: the gradient norm and
// the tied embedding (GPT-2's test) must not read the rest.  Over LibTorch 1.13's Gloo
// alone, which has no reduce-scatter, the buckets are all-reduced.
TEST(Equivalence, ZeroOneMatchesSerial) {
  const std::string zero = "zero_stage: 1\n";
  const Outcome dp2 = train("dp2_zero", "[2, 1, 1]", 2, 2, "1f1b", 1, "--threads 1", zero);
  expect_equivalent(serial(2), dp2, "dp=2 zero-1");
  const Outcome one = train("dp1_zero", "[1, 1, 1]", 1, 2, "1f1b", 1, "--threads 1", zero);
  ASSERT_GT(optimizer_state_bytes(one), 0) << one.log;
  EXPECT_NEAR(optimizer_state_bytes(dp2) / optimizer_state_bytes(one), 0.5, 1e-4) << dp2.log;
  EXPECT_NE(dp2.log.find("gradients reduce-scattered"), std::string::npos) << dp2.log;
  const Outcome gloo = train("dp2_zero_gloo", "[2, 1, 1]", 2, 2, "1f1b", 1, "--threads 1", zero, "QN_COMM_BACKEND=gloo ");
  EXPECT_NE(gloo.log.find(TORCH_VERSION_MAJOR >= 2 ? "gradients reduce-scattered" : "gradients all-reduced"),
            std::string::npos)
      << gloo.log;
  expect_equivalent(serial(2), gloo, "dp=2 zero-1 over Gloo alone");
  expect_equivalent(serial(2), train("dp2_zero_buckets", "[2, 1, 1]", 2, 2, "1f1b", 1, "--threads 1",
                                     zero + "bucket_size_mb: 0.05\n"),
                    "dp=2 zero-1, 50 kB buckets");
  expect_equivalent(serial(2), train("dp2tp2_zero", "[2, 2, 1]", 4, 2, "1f1b", 1, "--threads 1", zero),
                    "dp=2 x tp=2 zero-1");
  expect_equivalent(serial(2), train("dp2tp2pp2_zero", "[2, 2, 2]", 8, 2, "1f1b", 1, "--threads 1", zero),
                    "dp=2 x tp=2 x pp=2 zero-1");
  expect_equivalent(serial(2),
                    train("dp2tp2pp2_zero_sel", "[2, 2, 2]", 8, 2, "1f1b", 1, "--threads 1",
                          zero + "recompute: selective\n"),
                    "dp=2 x tp=2 x pp=2 zero-1 + selective recomputation");
}

// sequence_parallel — outside the tensor-parallel regions each tp rank holds half the
// tokens (the ViT's 50 split 25/25): the serial run's losses and parameters on tp 2 and
// 2x2x2, and on 2x2x2 with all three memory options at once (with selective recomputation
// and ZeRO-1).
TEST(Equivalence, SequenceParallelMatchesSerial) {
  const std::string sp = "sequence_parallel: true\n";
  expect_equivalent(serial(2), train("tp2_sp", "[1, 2, 1]", 2, 2, "1f1b", 1, "--threads 1", sp), "tp=2 sequence parallel");
  expect_equivalent(serial(2), train("dp2tp2pp2_sp", "[2, 2, 2]", 8, 2, "1f1b", 1, "--threads 1", sp),
                    "dp=2 x tp=2 x pp=2 sequence parallel");
  expect_equivalent(serial(2),
                    train("dp2tp2pp2_all", "[2, 2, 2]", 8, 2, "1f1b", 1, "--threads 1",
                          sp + "recompute: selective\nzero_stage: 1\n"),
                    "dp=2 x tp=2 x pp=2 sequence parallel + selective + zero-1");
}

}  // namespace
