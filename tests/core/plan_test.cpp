// Plan: the original configs load unchanged; every bad plan names key, value, fix.
#include <gtest/gtest.h>

#include <fstream>
#include <tuple>

#include "core/error.h"
#include "core/plan.h"
#include "core/plan_keys.h"
#include "core/run_layout.h"

using namespace quintnet::core;

namespace {

const std::string kOriginalVit = std::string(QN_SOURCE_DIR) + "/experiments/configs/original/config.yaml";
const std::string kOriginalGpt2 = std::string(QN_SOURCE_DIR) + "/experiments/configs/original/gpt2_config.yaml";

// A valid 2x2x2 ViT plan with one line replaced / added.
std::string vit_yaml(const std::string& extra = "") {
  return "batch_size: 32\ngrad_acc_steps: 2\nlearning_rate: 1e-4\nimg_size: 28\npatch_size: 4\n"
         "hidden_dim: 64\nn_heads: 4\ndepth: 8\nmesh_dim: [2, 2, 2]\nmesh_name: ['dp', 'tp', 'pp']\n"
         "strategy_name: '3d'\nschedule: '1f1b'\n" + extra;
}

// The ConfigError message of loading `text`; empty when it loads.
std::string error_of(const std::string& text, std::optional<int> world = std::nullopt) {
  try {
    parse_plan_text(text, "test.yaml", world);
  } catch (const ConfigError& e) {
    return e.what();
  }
  return "";
}

#define EXPECT_MESSAGE(text, ...)                                             \
  do {                                                                        \
    const std::string msg = error_of(text);                                   \
    for (const char* part : {__VA_ARGS__})                                    \
      EXPECT_NE(msg.find(part), std::string::npos) << "'" << part << "' not in: " << msg; \
  } while (0)

}  // namespace

TEST(Plan, OriginalVitConfigLoadsUnchanged) {
  LoadedPlan loaded = load_plan(kOriginalVit, 8);
  const Plan& p = loaded.plan;
  EXPECT_TRUE(loaded.warnings.empty()) << loaded.warnings.front();
  EXPECT_EQ(p.model.kind(), "vit");
  EXPECT_EQ(p.dp(), 2);
  EXPECT_EQ(p.tp(), 2);
  EXPECT_EQ(p.pp(), 2);
  EXPECT_EQ(p.batch_size, 32);
  EXPECT_EQ(p.microbatches(), 2);
  EXPECT_EQ(p.micro_batch_size(), 8);  // 32 / (2 microbatches x dp 2)
  EXPECT_DOUBLE_EQ(p.learning_rate, 1e-4);
  EXPECT_EQ(p.model.as<VitConfig>().depth, 8);
  EXPECT_EQ(p.model.as<VitConfig>().hidden_dim, 64);
  EXPECT_EQ(p.strategy(), "3d");
  EXPECT_EQ(p.schedule_kind(), ScheduleKind::OneFOneB);
  EXPECT_EQ(p.dataset_path, "/mnt/dataset/mnist/");
  EXPECT_EQ(p.device_type, Device::Cuda);
}

TEST(Plan, OriginalGpt2ConfigLoadsUnchanged) {
  LoadedPlan loaded = load_plan(kOriginalGpt2, 8);
  const Plan& p = loaded.plan;
  EXPECT_TRUE(loaded.warnings.empty()) << loaded.warnings.front();
  EXPECT_EQ(p.model.kind(), "gpt2");
  const Gpt2Config& gpt2 = p.model.as<Gpt2Config>();
  EXPECT_EQ(gpt2.n_layer, 12);
  EXPECT_EQ(gpt2.n_embd, 768);
  EXPECT_EQ(gpt2.vocab_size, 50257);
  EXPECT_DOUBLE_EQ(gpt2.layer_norm_epsilon, 1e-5);
  EXPECT_EQ(p.micro_batch_size(), 32);  // 512 / (8 x 2)
  EXPECT_EQ(p.warmup_steps, 200);
}

TEST(Plan, JsonAndYamlGiveTheSamePlan) {
  Plan from_yaml = parse_plan_text(vit_yaml(), "a.yaml").plan;
  Plan from_json = parse_plan_json(from_yaml.to_json(), "a.json").plan;
  EXPECT_EQ(from_yaml.to_json(), from_json.to_json());
  Plan from_json_text = parse_plan_text(from_yaml.to_json().dump(), "a.json").plan;
  EXPECT_EQ(from_yaml.to_json(), from_json_text.to_json());
}

TEST(Plan, MeshProductMustEqualWorldSize) {
  const std::string msg = error_of(vit_yaml(), 4);
  EXPECT_NE(msg.find("needs 8 ranks"), std::string::npos) << msg;
  EXPECT_NE(msg.find("world size is 4"), std::string::npos) << msg;
}

TEST(Plan, RejectsHeadsNotDivisibleByTp) {
  EXPECT_MESSAGE(vit_yaml("n_heads: 1\nhidden_dim: 63\n"), "n_heads", "not divisible by tp = 2");
}

TEST(Plan, RejectsHiddenNotDivisibleByHeads) {
  EXPECT_MESSAGE(vit_yaml("hidden_dim: 66\n"), "hidden_dim", "66", "n_heads = 4");
}

TEST(Plan, RejectsFewerLayersThanStages) {
  EXPECT_MESSAGE(vit_yaml("depth: 1\n"), "depth", "1 layers cannot fill 2 pipeline stages");
  EXPECT_MESSAGE(vit_yaml("depth: 3\nschedule: interleaved\nvirtual_stages: 2\n"), "depth", "4 pipeline stages");
}

TEST(Plan, RejectsTooFewMicrobatchesForInterleaved) {
  EXPECT_MESSAGE("batch_size: 4\ngrad_acc_steps: 2\nmesh_dim: [1, 1, 4]\nschedule: interleaved\nvirtual_stages: 2\n",
                 "grad_acc_steps", "fewer than the 4 pipeline stages");
}

TEST(Plan, RejectsUnknownScheduleStrategyModel) {
  EXPECT_MESSAGE(vit_yaml("schedule: 2f2b\n"), "unknown schedule '2f2b'", "1f1b");
  EXPECT_MESSAGE(vit_yaml("strategy_name: 4d\n"), "strategy_name", "unknown strategy '4d'");
  EXPECT_MESSAGE(vit_yaml("model: resnet\n"), "model", "unknown model 'resnet'", "vit or gpt2");
  EXPECT_MESSAGE(vit_yaml("mesh_name: ['dp', 'tp', 'ep']\n"), "mesh_name", "unknown axis 'ep'");
  EXPECT_MESSAGE(vit_yaml("precision: fp16\n"), "precision", "unknown precision 'fp16'", "fp32, bf16 or bf16_weights");
  EXPECT_MESSAGE(vit_yaml("device_type: tpu\n"), "device_type", "unknown device 'tpu'", "cpu or cuda");
  EXPECT_MESSAGE(vit_yaml("kernels: triton\n"), "kernels", "unknown kernel set 'triton'", "unfused, fused or flash");
}

// The typed options are written back under their names: a plan round-trips.
TEST(Plan, TypedOptionsRoundTripThroughTheirNames) {
  const Plan p = parse_plan_text(vit_yaml("precision: bf16\nrecompute: selective\nkernels: flash\n"),
                                             "<test>").plan;
  EXPECT_EQ(p.precision, Precision::Bf16);
  EXPECT_EQ(p.recompute, Recompute::Selective);
  EXPECT_EQ(p.kernels, KernelSet::Flash);
  EXPECT_EQ(p.mesh_name, all_axes());
  const nlohmann::json j = p.to_json();
  EXPECT_EQ(j["precision"], "bf16");
  EXPECT_EQ(j["recompute"], "selective");
  EXPECT_EQ(j["kernels"], "flash");
  EXPECT_EQ(j["mesh_name"], nlohmann::json({"dp", "tp", "pp"}));
  const Plan again = parse_plan_json(j, "<json>").plan;
  EXPECT_EQ(again.to_json(), j);
}

// The plan resolved once (core/run_layout.h): sizes, strategy, schedule and stages agree
// with the plan's own accessors and with what the schedule generator makes of them.
TEST(RunLayout, ResolvesMeshScheduleAndStagesOnce) {
  const Plan p = parse_plan_text(
      "batch_size: 32\ngrad_acc_steps: 4\nmesh_dim: [2, 2, 2]\nschedule: interleaved\nvirtual_stages: 2\n", "<test>")
                           .plan;
  const RunLayout l = resolve_layout(p);
  EXPECT_EQ(l.dp, 2);
  EXPECT_EQ(l.tp, 2);
  EXPECT_EQ(l.pp, 2);
  EXPECT_EQ(l.world_size(), 8);
  EXPECT_EQ(l.strategy, "3d");
  EXPECT_TRUE(l.uses(Axis::Pp));
  EXPECT_EQ(l.chunks, 2);
  EXPECT_EQ(l.microbatches, 4);
  EXPECT_EQ(l.micro_batch_size, 4);
  EXPECT_EQ(l.schedule.pp, 2);
  EXPECT_EQ(l.schedule.chunks, 2);
  EXPECT_EQ(l.schedule.microbatches, 4);
  ASSERT_EQ(l.stages.size(), 4u);
  EXPECT_EQ(l.stages.front().first, 0);
  EXPECT_EQ(l.stages.back().end, l.model.layers);
  for (size_t s = 1; s < l.stages.size(); ++s) EXPECT_EQ(l.stages[s].first, l.stages[s - 1].end);
  EXPECT_EQ(l.mesh.group(0, Axis::Tp), (std::vector<int>{0, 1}));
  EXPECT_EQ(l.mesh.group(0, Axis::Dp), (std::vector<int>{0, 2}));
  EXPECT_EQ(l.mesh.group(0, Axis::Pp), (std::vector<int>{0, 4}));
}

// A strategy that does not pipeline runs one chunk, whatever virtual_stages says: the
// executor always did, and the simulator now takes the same layout.
TEST(RunLayout, AStrategyWithoutPipelineRunsOneChunk) {
  const Plan p = parse_plan_text(
      "batch_size: 8\ngrad_acc_steps: 2\nmesh_dim: [2, 1, 1]\nschedule: interleaved\nvirtual_stages: 2\n", "<test>")
                           .plan;
  const RunLayout l = resolve_layout(p);
  EXPECT_EQ(l.strategy, "dp");
  EXPECT_EQ(l.chunks, 1);
  EXPECT_EQ(l.stages.size(), 1u);
}

// Memory at scale: an unknown recompute value, sequence parallelism without tp, and the
// ZeRO stages that are not built get one message naming the key.
TEST(Plan, RejectsMemoryOptionsItCannotRun) {
  EXPECT_MESSAGE(vit_yaml("recompute: some\n"), "recompute", "unknown value 'some'", "none, selective or full");
  EXPECT_MESSAGE("batch_size: 8\nmesh_dim: [2, 1, 1]\nsequence_parallel: true\n", "sequence_parallel", "tp > 1");
  // The ViT's 49 patches and class token over tp 4.
  EXPECT_MESSAGE("batch_size: 8\nmesh_dim: [1, 4, 1]\nsequence_parallel: true\n", "sequence_parallel",
                 "50 tokens per sample do not split evenly over tp 4");
  EXPECT_MESSAGE(vit_yaml("zero_stage: 2\n"), "zero_stage", "2 is not built", "choose 0 or 1");
  EXPECT_MESSAGE(vit_yaml("zero_stage: 4\n"), "zero_stage", "out of range");
  EXPECT_MESSAGE(vit_yaml("sequence_parallel: maybe\n"), "sequence_parallel");
  const auto plan = parse_plan_text(vit_yaml("recompute: full\nsequence_parallel: true\nzero_stage: 1\n"), "t").plan;
  EXPECT_EQ(plan.recompute, Recompute::Full);
  EXPECT_TRUE(plan.sequence_parallel);
  EXPECT_EQ(plan.zero_stage, 1);
}

TEST(Plan, RejectsStrategyThatIgnoresAMeshAxis) {
  EXPECT_MESSAGE(vit_yaml("strategy_name: dp_pp\n"), "strategy_name", "does not use the tp axis");
}

TEST(Plan, RejectsZeroNegativeAndHugeSizes) {
  EXPECT_MESSAGE(vit_yaml("batch_size: 0\n"), "batch_size", "out of range");
  EXPECT_MESSAGE(vit_yaml("learning_rate: -1\n"), "learning_rate", "out of range");
  EXPECT_MESSAGE(vit_yaml("depth: 99999999999999999999999\n"), "depth", "out of range");
  EXPECT_MESSAGE(vit_yaml("mesh_dim: [2, 0, 2]\n"), "mesh_dim", "whole numbers from 1");
}

TEST(Plan, RejectsWrongTypesNamingTheLine) {
  // batch_size is on line 1 of the document.
  EXPECT_MESSAGE("batch_size: lots\n", "test.yaml:1: batch_size", "expected a whole number", "\"lots\"");
  EXPECT_MESSAGE(vit_yaml("mesh_dim: 8\n"), "mesh_dim", "expected a list");
  EXPECT_MESSAGE("[1, 2]\n", "must be a mapping");
  EXPECT_MESSAGE("batch_size: [\n", "YAML syntax error");
  EXPECT_MESSAGE("{\"batch_size\": }", "JSON syntax error at byte");
}

TEST(Plan, RejectsBatchThatDoesNotSplitIntoMicrobatches) {
  EXPECT_MESSAGE(vit_yaml("batch_size: 33\n"), "batch_size", "33 is not divisible by grad_acc_steps x dp = 2 x 2 = 4",
                 "32 or 36");
}

TEST(Plan, UnknownKeyWarnsWithTheNearestKnownKey) {
  LoadedPlan loaded = parse_plan_text(vit_yaml("learing_rate: 0.1\n"), "test.yaml");
  ASSERT_EQ(loaded.warnings.size(), 1u);
  EXPECT_NE(loaded.warnings[0].find("test.yaml:13: learing_rate"), std::string::npos) << loaded.warnings[0];
  EXPECT_NE(loaded.warnings[0].find("did you mean 'learning_rate'"), std::string::npos) << loaded.warnings[0];
}

TEST(Plan, StrategyDefaultsToTheAxesTheMeshUses) {
  EXPECT_EQ(parse_plan_text("batch_size: 8\nmesh_dim: [2, 1, 1]\n", "t").plan.strategy(), "dp");
  EXPECT_EQ(parse_plan_text("batch_size: 8\nmesh_dim: [2, 2, 1]\n", "t").plan.strategy(), "dp_tp");
  EXPECT_EQ(parse_plan_text("batch_size: 8\nmesh_dim: [1, 2, 2]\n", "t").plan.strategy(), "tp_pp");
}

// docs/CONFIG.md's key tables are the declaration's own (quintnet check-config --keys).
TEST(PlanKeys, ConfigDocsListEveryKeyAsDeclared) {
  std::ifstream in(std::string(QN_SOURCE_DIR) + "/docs/CONFIG.md");
  const std::string doc((std::istreambuf_iterator<char>(in)), {});
  const std::string begin = "<!-- keys:begin -->\n", end = "<!-- keys:end -->";
  const size_t a = doc.find(begin), b = doc.find(end);
  ASSERT_NE(a, std::string::npos);
  ASSERT_NE(b, std::string::npos);
  EXPECT_EQ(doc.substr(a + begin.size(), b - a - begin.size()), quintnet::core::plan_keys_markdown())
      << "regenerate the block with: quintnet check-config --keys";
}

// Every declared key is read and written: a plan that sets each to a value other than
// its default comes back with that value from to_json.
TEST(PlanKeys, EveryKeyIsReadAndWritten) {
  const auto vit = quintnet::core::parse_plan_text(
      "model: vit\nbatch_size: 64\nnum_epochs: 3\nlearning_rate: 0.002\ngrad_acc_steps: 4\nmax_grad_norm: 2.5\n"
      "patience: 7\nweight_decay: 0.05\nwarmup_steps: 9\nseed: 7\nmax_samples: 100\nmax_val_samples: 50\n"
      "img_size: 32\npatch_size: 8\nhidden_dim: 48\nin_channels: 3\nn_heads: 3\ndepth: 6\nnum_classes: 5\n"
      "dropout: 0.2\ndevice_type: cuda\nprecision: bf16\nmesh_dim: [2, 1, 1]\nmesh_name: [dp, tp, pp]\n"
      "strategy_name: dp\nschedule: afab\nvirtual_stages: 1\nbucket_size_mb: 5\nrecompute: selective\nzero_stage: 1\n"
      "sequence_parallel: false\nmax_seq_length: 77\n"
      "max_target_length: 11\nlog_interval: 3\neval_interval: 4\nsave_interval: 5\noutput_dir: out\n"
      "dataset_path: /data\ncheckpoint_path: /w.safetensors\ndataset_name: d\ntokenizer_path: /tok\n",
      "<vit>");
  EXPECT_TRUE(vit.warnings.empty());
  const nlohmann::json v = vit.plan.to_json();
  EXPECT_EQ(v["batch_size"], 64);
  EXPECT_EQ(v["learning_rate"], 0.002);
  EXPECT_EQ(v["seed"], 7);
  EXPECT_EQ(v["in_channels"], 3);
  EXPECT_EQ(v["dropout"], 0.2);
  EXPECT_EQ(v["precision"], "bf16");
  EXPECT_EQ(v["bucket_size_mb"], 5.0);
  EXPECT_EQ(v["recompute"], "selective");
  EXPECT_EQ(v["zero_stage"], 1);
  EXPECT_EQ(v["max_target_length"], 11);
  EXPECT_EQ(v["output_dir"], "out");
  EXPECT_EQ(v["tokenizer_path"], "/tok");
  EXPECT_EQ(v["dataset_name"], "d");
  EXPECT_FALSE(v.contains("model_config"));
  // Every declared key of a ViT plan but the other models' blocks and the ones read for compatibility only.
  for (const auto& k : quintnet::core::plan_keys()) {
    if ((k.model.empty() || k.model == "vit") && k.name != "num_workers") {
      EXPECT_TRUE(v.contains(k.name)) << k.name;
    }
  }

  const auto gpt = quintnet::core::parse_plan_text(
      "model_config:\n  vocab_size: 1000\n  n_positions: 128\n  n_embd: 96\n  n_layer: 3\n  n_head: 6\n"
      "  attn_pdrop: 0.0\n  embd_pdrop: 0.05\n  resid_pdrop: 0.02\n  layer_norm_epsilon: 1.0e-6\n"
      "max_seq_length: 64\nbatch_size: 8\n",
      "<gpt>");
  const nlohmann::json g = gpt.plan.to_json();
  EXPECT_EQ(g["model"], "gpt2");
  EXPECT_EQ(g["model_config"]["n_inner"], 4 * 96);  // its default follows n_embd
  EXPECT_EQ(g["model_config"]["embd_pdrop"], 0.05);
  EXPECT_EQ(g["model_config"]["layer_norm_epsilon"], 1e-6);
  EXPECT_FALSE(g.contains("img_size"));
  // A llama_config block implies the Llama; its keys carry Hugging Face's names, its
  // defaults follow the sizes given (key/value heads = query heads, SwiGLU 8h/3 rounded to 256).
  const auto llama = quintnet::core::parse_plan_text(
      "llama_config:\n  vocab_size: 1000\n  hidden_size: 96\n  num_hidden_layers: 3\n  num_attention_heads: 6\n"
      "  rope_theta: 10000.0\n  rms_norm_eps: 1.0e-6\n  tie_word_embeddings: true\n"
      "  rope_scaling: {rope_type: llama3, factor: 8.0, low_freq_factor: 1.0, high_freq_factor: 4.0,"
      " original_max_position_embeddings: 8192}\nmax_seq_length: 64\nbatch_size: 8\n",
      "<llama>");
  EXPECT_TRUE(llama.warnings.empty()) << llama.warnings.front();
  const nlohmann::json l = llama.plan.to_json();
  EXPECT_EQ(l["model"], "llama");
  EXPECT_EQ(l["llama_config"]["num_key_value_heads"], 6);
  EXPECT_EQ(l["llama_config"]["intermediate_size"], 256);
  EXPECT_EQ(l["llama_config"]["rope_theta"], 10000.0);
  EXPECT_EQ(l["llama_config"]["tie_word_embeddings"], true);
  EXPECT_EQ(l["llama_config"]["rope_scaling"]["factor"], 8.0);
  EXPECT_EQ(l["llama_config"]["rope_scaling"]["original_max_position_embeddings"], 8192);
  EXPECT_FALSE(l.contains("model_config"));
  for (const auto& k : quintnet::core::plan_keys())
    if (k.model == "llama") {
      EXPECT_TRUE(l.contains("llama_config") && l["llama_config"].contains(k.name.substr(k.name.find('.') + 1))) << k.name;
    }
  // Written plans load again into the same plan.
  EXPECT_EQ(quintnet::core::parse_plan_json(g, "<again>").plan.to_json(), g);
  EXPECT_EQ(quintnet::core::parse_plan_json(v, "<again>").plan.to_json(), v);
  EXPECT_EQ(quintnet::core::parse_plan_json(l, "<again>").plan.to_json(), l);
}

// Rotary scaling: Llama 3.1's (rope_type llama3) or none; any other kind, or a band whose
// high frequency factor does not exceed the low one, is refused by key.
TEST(Plan, LlamaRopeScalingIsLlama3OrNone) {
  auto plan = [](const std::string& scaling) {
    return "llama_config: {hidden_size: 96, num_attention_heads: 12, rope_scaling: " + scaling +
           "}\nbatch_size: 8\nmax_seq_length: 16\n";
  };
  const Plan none = parse_plan_text(plan("{rope_type: default}"), "t").plan;
  EXPECT_FALSE(none.model.as<LlamaConfig>().rope_scaling.scales());
  const Plan llama31 = parse_plan_text(plan("{rope_type: llama3, factor: 8.0, original_max_position_embeddings: 8192}"), "t").plan;
  EXPECT_EQ(llama31.model.as<LlamaConfig>().rope_scaling.factor, 8.0);
  EXPECT_EQ(llama31.model.as<LlamaConfig>().rope_scaling.high_freq_factor, 4.0);  // Llama 3.1's, when not given
  EXPECT_MESSAGE(plan("{rope_type: linear, factor: 2.0}"), "rope_scaling", "rope_type 'linear' is not implemented");
  EXPECT_MESSAGE(plan("{rope_type: llama3, factor: 8.0, low_freq_factor: 4.0, high_freq_factor: 1.0}"),
                 "high_freq_factor must exceed low_freq_factor");
}

// Grouped-query attention's shapes: the key/value heads divide the query heads, and tp
// divides them or is a multiple of them; refused by key with the fix.
TEST(Plan, LlamaKeyValueHeadsAndTpMustFit) {
  auto plan = [](const std::string& kv, const std::string& tp) {
    return "llama_config: {hidden_size: 96, num_attention_heads: 12, num_key_value_heads: " + kv +
           ", intermediate_size: 192}\nbatch_size: 8\nmax_seq_length: 16\nmesh_dim: [1, " + tp + ", 1]\n";
  };
  EXPECT_NO_THROW(parse_plan_text(plan("4", "2"), "t"));
  EXPECT_NO_THROW(parse_plan_text(plan("4", "4"), "t"));
  EXPECT_NO_THROW(parse_plan_text(plan("2", "4"), "t"));  // each key/value head on two ranks
  for (const auto& [kv, tp, says] : std::vector<std::tuple<std::string, std::string, std::string>>{
           {"5", "1", "num_key_value_heads"}, {"4", "3", "tp"}}) {
    try {
      parse_plan_text(plan(kv, tp), "t");
      ADD_FAILURE() << "kv " << kv << " tp " << tp << " accepted";
    } catch (const quintnet::core::ConfigError& e) {
      EXPECT_NE(std::string(e.what()).find(says), std::string::npos) << e.what();
    }
  }
}

// Context parallelism: a fourth axis, Llama only, two equal chunks per cp rank.
TEST(Plan, ContextParallelAxisAndItsRules) {
  const std::string llama =
      "model: llama\nllama_config: {vocab_size: 101, max_position_embeddings: 64, hidden_size: 32, intermediate_size: 64,"
      " num_hidden_layers: 4, num_attention_heads: 4, num_key_value_heads: 2}\nbatch_size: 8\n"
      "mesh_name: ['dp', 'cp', 'tp', 'pp']\n";
  const Plan plan = parse_plan_text(llama + "mesh_dim: [1, 2, 2, 2]\nmax_seq_length: 16\n", "t").plan;
  EXPECT_EQ(plan.cp(), 2);
  EXPECT_EQ(plan.world_size(), 8);
  const RunLayout layout = resolve_layout(plan);
  EXPECT_TRUE(layout.uses(Axis::Cp));
  EXPECT_EQ(layout.replicas(), 2);
  // tp innermost, then cp, then dp, pp outermost (Megatron-LM's tp-cp-dp-pp).
  EXPECT_EQ(layout.mesh.rank_order(), (std::vector<std::string>{"tp", "cp", "dp", "pp"}));
  EXPECT_EQ(layout.mesh.group(0, Axis::Cp), (std::vector<int>{0, 2}));
  EXPECT_MESSAGE(llama + "mesh_dim: [1, 2, 1, 1]\nmax_seq_length: 18\n", "max_seq_length",
                 "18 is not divisible by 2 x cp = 4");
  EXPECT_MESSAGE(llama + "mesh_dim: [1, 2, 4, 1]\nmax_seq_length: 12\nsequence_parallel: true\n", "sequence_parallel",
                 "6 tokens per sample on each cp rank do not split evenly over tp 4");
  EXPECT_MESSAGE("batch_size: 8\nmesh_dim: [1, 2]\nmesh_name: ['dp', 'cp']\n", "mesh_dim", "a ViT has no context parallelism",
                 "only gpt2 and llama");
  // GPT-2 splits its sequences too (its position table's rows per chunk), without dropout
  // on the attention weights: the ring draws none.
  const std::string gpt2 = "model_config: {n_embd: 64, n_layer: 2, n_head: 4, attn_pdrop: 0.1}\nbatch_size: 8\n"
                           "max_seq_length: 16\nmesh_name: ['dp', 'cp', 'tp', 'pp']\nmesh_dim: [1, 2, 1, 1]\n";
  EXPECT_MESSAGE(gpt2, "model_config.attn_pdrop", "0.1 with cp > 1", "set attn_pdrop: 0.0");
  EXPECT_EQ(error_of(std::string(gpt2).replace(gpt2.find("attn_pdrop: 0.1"), 15, "attn_pdrop: 0.0")), "");
}
