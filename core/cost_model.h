#pragma once
// The cost model: FLOPs and bytes of a transformer's pieces, from its dimensions.
// Used by the simulator for op times (before calibration) and memory, and to report
// MFU.  Conventions (Megatron-LM, Narayanan et al. 2021; Korthikanti et al. 2022):
//   forward FLOPs per token per layer = 24 h^2 + 4 s h   (QKV+out 8h^2, MLP 16h^2
//   with a 4h MLP, attention scores and values 4sh); backward = 2 x forward; the
//   LM head 2 h V per token.  A training step is ~ 6 N + 12 L h s FLOPs per token.
// In general (grouped-query attention with g key/value heads of width d, a gated MLP of
// width f): 2 (2 h^2 + 2 h g d) + 2 m h f + 4 s h, m = 3 gated (SwiGLU) or 2.
#include <string>
#include <vector>

#include "core/plan.h"

namespace quintnet::core {

// The parts of a model around its transformer layers, as its description gives them
// (core/models/): the cost model and the kernel list ask which parts a model has, never
// which model it is.
enum class Inputs {
  Tokens,               // a vocabulary lookup and learnt positions (GPT)
  TokensRotaryPositions,  // a vocabulary lookup; positions rotate q and k in every layer (Llama)
  ImagePatches          // patches projected, a class token and positions (ViT)
};
enum class Head {
  TiedVocabulary,       // the final norm, then logits with the embedding's weights (GPT-2, Llama 3.2 1B/3B)
  UntiedVocabulary,     // the final norm, then logits with weights of its own (Llama 3 8B and up)
  ClassTokenClassifier  // LayerNorm and a classifier on the class token only (ViT)
};

struct ModelDims {
  std::string name;
  Inputs inputs = Inputs::Tokens;
  Head head = Head::TiedVocabulary;
  bool causal = true;  // attention to earlier tokens only (a language model)
  int layers = 0, hidden = 0, heads = 0, ffn = 0;
  int kv_heads = 0;        // grouped-query attention's key/value heads; 0: one per query head
  bool gated_mlp = false;  // SwiGLU: gate and up projections (3 matrices), else fc1 + GeLU + fc2
  bool biases = true;      // the linear layers have biases and the norms are LayerNorms (else RMSNorms, no biases)
  int vocab = 0;   // GPT: vocabulary; ViT: classes
  int seq = 0;     // tokens per sample (ViT: patches + class token)
  int patch_inputs = 0;  // ViT: patch_size^2 x channels
  // Whether training draws dropout masks (each stored for the backward, with the
  // dropped-out attention weights: Korthikanti et al.'s counts include them).
  bool dropout = true;
  double parameters() const;  // total
  int key_value_heads() const { return kv_heads > 0 ? kv_heads : heads; }
  double layer_parameters() const;
  double layer_forward_flops_per_token() const;  // the formula above (s = seq)
};

// gpt2-124m, gpt2-355m, gpt2-774m, gpt2-1.5b, gpt3-1.3b, gpt3-6.7b, gpt3-13b, gpt3-175b,
// llama3-8b, llama3-70b, llama3-405b, llama3.2-1b, llama3.2-3b; throws ConfigError naming
// the known ones.
ModelDims model_dims(const std::string& name);
ModelDims model_dims(const ModelConfig& config, int seq_len);  // from a plan's model
std::vector<std::string> known_models();

// How a plan trades compute for memory (core::Plan's keys of the same names).
struct MemoryOptions {
  Recompute recompute = Recompute::None;
  bool sequence_parallel = false;
  int zero_stage = 0;
  // precision: bf16_weights — 2-byte weights, fp32 gradients (accumulated and all-reduced
  // in fp32) and fp32 masters beside the moments, on either device (Megatron-LM's bf16).
  bool bf16_weights = false;
  static MemoryOptions of(const Plan& plan);
};

// What one pipeline stage (layers [first, end) plus embedding / head when it holds
// them) costs for one microbatch of `micro_batch` samples, per tensor-parallel rank.
struct StageCost {
  double forward_flops = 0, backward_flops = 0;
  double parameters = 0;            // this rank's share
  double tied_copy_parameters = 0;  // of those, a tied head's copy of the embedding (last stage, pp > 1)
  double boundary_bytes = 0;        // activation (or its gradient) sent to the next stage
  double tp_allreduce_bytes = 0;    // one TP all-reduce (b x s x h activations)
  int tp_allreduces_forward = 0;    // per microbatch forward (2 per layer); backward the same
  double activation_bytes = 0;      // stored for the backward, per microbatch in flight
  // Recomputation: forward FLOPs done again inside the backward (full: the layers'
  // forward; selective: the attention core's QK^T and .V).
  double recompute_flops = 0;
  // What lives only while one layer's backward runs, on top of the stored activations:
  // the gradients flowing through it (at its output and its input, s b h values each,
  // and the MLP's widest, s b ffn / t) and, with full recomputation, the layer's
  // recomputed activations.  Korthikanti et al. count stored activations only.
  double backward_working_bytes = 0;
};
// Activation bytes per layer follow Korthikanti et al. 2022, Table 2 (16-bit values,
// scaled by bytes_per_value / 2): s b h (10 + 24/t + 5as/(ht)) without sequence
// parallelism, s b h (34/t + 5as/(ht)) with it; selective recomputation drops the 5as/(ht)
// term; full keeps each layer's input, 2sbh (/t with sequence parallelism).
StageCost stage_cost(const ModelDims& m, int first_layer, int end_layer, int micro_batch, int tp,
                     double bytes_per_value = 2.0, const MemoryOptions& options = {});

// What a pipeline rank holds beyond its layers' activations (the executor's
// exec/pp/pipeline_runner.h), `boundary_bytes` each: a rank that sends activations keeps
// each in-flight microbatch's stage output until that microbatch's backward, and the
// gradient it receives for it during that backward; a rank that sends gradients holds
// those the schedule has not yet shown received (core/schedule_delivery.h), counted as two:
// 1F1B's last stage holds the one just sent and the one before, freed when the next
// activation arrives.
double pipeline_buffer_bytes(double boundary_bytes, int microbatches_in_flight, bool sends_activations,
                             bool sends_gradients);

// One rank's memory, by what holds it.
struct MemorySplit {
  double weights = 0, gradients = 0, optimizer = 0, activations = 0;
  double total() const { return weights + gradients + optimizer + activations; }
};
// `parameters` of the rank: 16-bit weights and gradients with an fp32 master copy and two
// Adam moments (12 bytes) on GPUs, fp32 weights, gradients and moments (8 bytes) on CPU;
// under bf16 weights 2-byte weights, 4-byte gradients and 12 bytes of optimizer state on
// either; zero_stage 1 keeps 1/dp of the optimizer state.  `activations`: bytes at the peak.
MemorySplit rank_memory(double parameters, double activations, bool fp32, const MemoryOptions& options, int dp);

// Bytes of one parameter's gradient (what the DP all-reduce moves): fp32 under bf16
// weights, else `bytes_per_value`; and of the weights the model computes with (what
// ZeRO-1's all-gather moves): 2 under bf16 weights.
double gradient_bytes_per_parameter(double bytes_per_value, const MemoryOptions& options);
double weight_bytes_per_parameter(double bytes_per_value, const MemoryOptions& options);

// Training FLOPs of one sample (forward + backward) for MFU.
double training_flops_per_sample(const ModelDims& m);

}  // namespace quintnet::core
