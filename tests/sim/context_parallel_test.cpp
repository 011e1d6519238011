// Context parallelism in the simulator: each cp rank computes s/cp tokens of every
// sample, and its ring attention's hops are SimGrid messages (sim/cp_ring.h) — beside the
// attention they overlap, on links the pipeline's and the gradients' messages use too.
// The plans are Llama 3 8B on DGX H100 nodes (--model llama3-8b), FlashAttention kernels.
#include <gtest/gtest.h>

#include <map>
#include <set>

#include "core/trace.h"
#include "simulate_command.h"

namespace {

using namespace quintnet::testing_util;  // simulate, run_command, bin, write_file
namespace core = quintnet::core;

// A Llama plan on a dp x cp x tp x pp mesh (--model replaces the sizes).
std::string llama_plan(const std::string& name, const std::string& mesh, int seq, int batch = 4, int microbatches = 2,
                       const std::string& extra = "") {
  return write_file(name, "model: llama\nllama_config: {hidden_size: 256, num_hidden_layers: 4, num_attention_heads: 8,"
                          " num_key_value_heads: 2, intermediate_size: 512}\nbatch_size: " + std::to_string(batch) +
                          "\ngrad_acc_steps: " + std::to_string(microbatches) +
                          "\ndevice_type: cuda\nkernels: flash\nmax_seq_length: " + std::to_string(seq) +
                          "\nmesh_dim: " + mesh + "\nmesh_name: [dp, cp, tp, pp]\n" + extra);
}

// DGX H100 without the memory check: a whole 8B model per GPU at 32k tokens does not fit.
std::string any_memory_h100() {
  return write_file("h100_any_memory.json", R"({"preset": "dgx-h100", "memory_bytes": 0})");
}

}  // namespace

// cp 2 instead of dp 2 gives each rank half the tokens of every sample (activations
// halve), the same compute per step (the same tokens over the same GPUs) and the
// gradients averaged over both ranks alike.  Alone on NVLink the ring's hops cost what
// the closed form says: hidden behind the attention of 16,384-token chunks but for the
// gradients' last hop home, and more at 128-token chunks.
TEST(Simulator, ContextParallelismSplitsTheSequenceAndItsRingCostsItsClosedForm) {
  const std::string args = " --model llama3-8b --nodes 1 --platform " + any_memory_h100();
  const auto dp2 = simulate("--config " + llama_plan("l8_dp2.yaml", "[2, 1, 1, 1]", 32768) + args + " --seq 32768");
  const auto cp2 = simulate("--config " + llama_plan("l8_cp2.yaml", "[1, 2, 1, 1]", 32768) + args + " --seq 32768");
  EXPECT_EQ(cp2.value("cp", 0), 2);
  EXPECT_NEAR(cp2["peak_memory_split"].value("activations", 0.0), dp2["peak_memory_split"].value("activations", 0.0) / 2,
              0.05 * dp2["peak_memory_split"].value("activations", 0.0));
  EXPECT_NEAR(cp2.value("step_time_s", 0.0), dp2.value("step_time_s", 0.0), 0.01 * dp2.value("step_time_s", 0.0));
  const double exposed = cp2.value("cp_ring_exposed_s", -1.0), closed_form = cp2.value("cp_ring_closed_form_s", -1.0);
  EXPECT_GT(exposed, 0) << "the gradients' last hop has nothing to hide behind";
  EXPECT_NEAR(exposed, closed_form, 1e-9 * closed_form);
  EXPECT_LT(exposed, 0.005 * cp2.value("step_time_s", 0.0));

  // 128-token chunks: the key/value hops outlast the attention beside them.
  const auto small = simulate("--config " + llama_plan("l8_cp8.yaml", "[1, 8, 1, 1]", 2048) + args + " --seq 2048");
  const double small_exposed = small.value("cp_ring_exposed_s", 0.0);
  EXPECT_NEAR(small_exposed, small.value("cp_ring_closed_form_s", 0.0), 1e-9 * small_exposed);
  EXPECT_GT(small_exposed, 0.02 * small.value("step_time_s", 0.0));
}

// A full simulation's ring: every forward and backward of a cp rank has one cp-ring event
// on its p2p lane, to the next rank of its cp group, with the ring's hops and bytes
// (forward: cp − 1 hops of a key/value block; backward: cp + 1 hops carrying the blocks
// and their gradients, 2cp − 1 blocks' bytes).
TEST(Simulator, TheCpRingIsTracedFromEachRankToTheNextOfItsGroup) {
  const std::string plan = llama_plan("l8_cp4.yaml", "[1, 4, 2, 1]", 8192);
  const std::string trace = ::testing::TempDir() + "/l8_cp4.json";
  ASSERT_EQ(run_command(bin("quintnet-simulate") + " --config " + plan + " --model llama3-8b --seq 8192 --nodes 1"
                        " --platform " + any_memory_h100() + " --exact --trace " + trace).code, 0);
  const core::Trace t = core::read_trace(trace);
  ASSERT_EQ(t.num_ranks(), 8);
  std::map<int, std::set<int>> peers;
  std::map<std::string, int> rings;
  std::map<std::string, double> bytes;
  for (const auto& e : t.events) {
    if (e.kind == "forward" || e.kind == "backward") ++rings[e.kind];
    if (e.kind != "cp-ring") continue;
    EXPECT_EQ(e.lane, core::Lane::P2P);
    peers[e.rank].insert(e.peer);
    const bool forward = e.name.find("gradients") == std::string::npos;
    EXPECT_NE(e.name.find(forward ? "(3 hops" : "(5 hops"), std::string::npos) << e.name;
    --rings[forward ? "forward" : "backward"];
    bytes[forward ? "forward" : "backward"] = static_cast<double>(e.bytes);
  }
  EXPECT_EQ(rings["forward"], 0) << "one ring per forward";
  EXPECT_EQ(rings["backward"], 0) << "one ring per backward";
  EXPECT_NEAR(bytes["backward"], bytes["forward"] * 7 / 3, 1e-6 * bytes["backward"]);
  for (int r = 0; r < 8; ++r) {
    const auto& rank = t.ranks[static_cast<size_t>(r)];
    const int next = [&] {
      for (int q = 0; q < 8; ++q) {
        const auto& other = t.ranks[static_cast<size_t>(q)];
        if (other.tp == rank.tp && other.pp == rank.pp && other.dp == rank.dp && other.cp == (rank.cp + 1) % 4) return q;
      }
      return -1;
    }();
    EXPECT_EQ(peers[r], std::set<int>{next}) << "rank " << r;
  }
}

// Across nodes (tp 8 x cp 2: each cp hop leaves through the GPU's NIC) the ring shares the
// NICs with the pipeline's messages and the gradient all-reduce, so its hops expose more
// than the closed form's, which gives each hop its route alone; and one replica simulated
// for all (cp hops as transfers to a peer host) gives what the full simulation gives.
TEST(Simulator, CpRingHopsShareTheNicsAndTheReducedModelEqualsTheFullOne) {
  const std::string plan = llama_plan("l8_cp2_tp8_pp2.yaml", "[2, 2, 8, 2]", 8192, 16, 8, "sequence_parallel: true\n");
  const std::string args = " --config " + plan + " --model llama3-8b --seq 8192 --platform dgx-h100 --nodes 8";
  const auto reduced = simulate(args), full = simulate(args + " --exact");
  EXPECT_EQ(reduced.value("replicas_simulated", 0), 1);
  EXPECT_EQ(full.value("replicas_simulated", 0), 4);
  for (const char* key : {"step_time_s", "bubble_fraction", "cp_ring_exposed_s"})
    EXPECT_NEAR(reduced.value(key, 0.0), full.value(key, 0.0), 1e-6 * full.value(key, 0.0)) << key;
  EXPECT_GT(full.value("cp_ring_exposed_s", 0.0), 1.05 * full.value("cp_ring_closed_form_s", 0.0));
}

// A slow cp rank holds up its ring partners at every hop: with a straggler the step is
// simulated in full (a stand-in replica would not wait for it), and the partner's waiting
// for the ring grows by far more than the closed form's.
TEST(Simulator, AStragglerHoldsUpItsCpRingPartners) {
  const std::string plan = llama_plan("l8_cp2_straggler.yaml", "[1, 2, 1, 1]", 8192);
  const std::string args = " --config " + plan + " --model llama3-8b --seq 8192 --nodes 1 --platform " + any_memory_h100();
  const auto even = simulate(args), straggler = simulate(args + " --straggler 1:0.8");
  EXPECT_EQ(straggler.value("replicas_simulated", 0), 2);
  EXPECT_GT(straggler.value("step_time_s", 0.0), 1.2 * even.value("step_time_s", 0.0));
  EXPECT_GT(straggler.value("cp_ring_exposed_s", 0.0), 10 * even.value("cp_ring_exposed_s", 0.0));
}
