#include "sim/step_costs.h"

#include <algorithm>

#include "core/error.h"
#include "core/layer_kernels.h"
#include "core/stage_balance.h"
#include "core/schedule_generators.h"
#include "core/schedule_validator.h"
#include "sim/cp_ring.h"
#include "sim/roofline.h"

namespace quintnet::sim {

namespace {

// What one pipeline rank computes per microbatch, over all its chunks.
struct RankWork {
  double forward_flops = 0, recompute_flops = 0, layers = 0;
  std::vector<core::Kernel> kernels;  // an op of a chunk takes 1/chunks of their time
};

core::KernelOptions kernel_options_of(const core::RunLayout& l, double bytes_per_value) {
  core::KernelOptions o;
  o.micro_batch = l.micro_batch_size;
  o.tp = l.tp;
  o.cp = l.cp;
  o.microbatches = l.microbatches;
  o.bytes_per_value = bytes_per_value;
  o.set = l.plan.kernels;
  o.memory = core::MemoryOptions::of(l.plan);
  return o;
}

// The calibrated machine's op costs at the plan's tp: a fixed part per layer and a part
// per FLOP, times what sharing its CPU costs (sim/calibration.h).  The forward FLOPs
// recomputed inside the backward cost what forward FLOPs cost (the fixed part per layer
// only when whole layers run again).
void push_calibrated_op_times(StepCosts& s, const RankWork& w, const Calibration& c, int world, bool full_recompute) {
  const OpTimeModel& k = c.costs_for_tp(s.tp);
  const double slowdown = c.slowdown_for(world);
  // Under full recomputation the first forward records no graph (the probe measured what
  // that saves); the one inside the backward does.
  const double no_graph = full_recompute ? c.no_graph_forward_ratio : 1.0;
  s.forward_s.push_back(no_graph * slowdown * (w.layers * k.forward_overhead_s + w.forward_flops / k.forward_flops_per_s));
  // dX and dW each cost one forward's FLOPs and half the backward's fixed part.
  const double half_backward =
      slowdown * (w.layers * k.backward_overhead_s / 2 + w.forward_flops / k.backward_flops_per_s);
  const double again =
      slowdown * ((full_recompute ? w.layers * k.forward_overhead_s : 0.0) + w.recompute_flops / k.forward_flops_per_s);
  s.backward_input_s.push_back(half_backward + again);
  s.backward_weight_s.push_back(half_backward);
}

// The rank's kernels on the platform's roofline (sim/roofline.h), kept for --kernels.
void push_roofline_op_times(StepCosts& s, RankWork&& w, const Platform& platform) {
  s.forward_s.push_back(pass_seconds(w.kernels, core::Pass::Forward, platform));
  s.backward_input_s.push_back(pass_seconds(w.kernels, core::Pass::BackwardInput, platform));
  s.backward_weight_s.push_back(pass_seconds(w.kernels, core::Pass::BackwardWeight, platform));
  s.kernels.push_back(std::move(w.kernels));
}

}  // namespace

core::RunLayout simulated_layout(const core::Plan& plan, const std::string& model_override, int seq_len) {
  core::ModelDims dims = model_override.empty()
                            ? core::model_dims(plan.model, seq_len > 0 ? seq_len : plan.max_seq_length)
                            : core::model_dims(model_override);
  if (seq_len > 0 && dims.inputs != core::Inputs::ImagePatches) dims.seq = seq_len;  // an image fixes its own
  return core::resolve_layout(plan, dims);
}

namespace {

// The attention core's kernels (scores, softmax and its parts, attention over values,
// FlashAttention): what a ring step of context parallelism overlaps.
bool attention_core_kernel(const core::Kernel& k) {
  for (const char* prefix : {"flash attention", "attention", "scale", "softmax", "causal mask"})
    if (k.name.rfind(prefix, 0) == 0) return true;
  return false;
}

// One pipeline rank's ring attention per microbatch (sim/cp_ring.h): the attention
// core's share of its op times, by pass, and the key/value block of all its layers.
CpRingCosts cp_ring_costs(const core::RunLayout& l, const core::ModelDims& local, const std::vector<core::Kernel>& kernels,
                          int layers, const Platform& p, double bytes) {
  CpRingCosts c;
  std::vector<core::Kernel> first, again;  // the attention as computed the first time / recomputed
  for (const core::Kernel& k : kernels)
    if (attention_core_kernel(k)) (k.name.find("(recompute)") == std::string::npos ? first : again).push_back(k);
  c.attention_forward_s = pass_seconds(first, core::Pass::Forward, p);
  c.attention_backward_s = pass_seconds(first, core::Pass::BackwardInput, p);
  c.attention_recompute_s = pass_seconds(again, core::Pass::BackwardInput, p);
  const double kv_width = std::max(static_cast<double>(local.key_value_heads()) / l.tp, 1.0) * local.hidden / local.heads;
  c.layers = layers;
  c.block_bytes = layers * 2.0 * l.micro_batch_size * local.seq * kv_width * bytes;  // K and V
  estimate_cp_ring(c, l.cp, l.tp, p);
  return c;
}

// One pipeline rank's share: its ops' times, its optimizer, its gradients and memory.
void add_pipeline_rank(StepCosts& s, const core::RunLayout& l, int r, const core::ScheduleStats& shape,
                       const Platform& platform, const Calibration* calibration) {
  const double bytes = l.plan.device_type == core::Device::Cpu ? 4.0 : 2.0;  // fp32 on CPU, 16-bit on GPUs
  const core::MemoryOptions options = core::MemoryOptions::of(l.plan);
  const core::KernelOptions kernel_options = kernel_options_of(l, bytes);
  const bool full_recompute = options.recompute == core::Recompute::Full;
  // What one rank computes: under context parallelism its s/cp tokens of every sample.
  core::ModelDims local = l.model;
  local.seq /= l.cp;
  RankWork work;
  int transformer_layers = 0;
  double params = 0, activations = 0, working = 0;
  for (int c = 0; c < l.chunks; ++c) {
    const core::LayerRange& range = l.stages[c * l.pp + r];
    const core::StageCost cost =
        core::stage_cost(local, range.first, range.end, l.micro_batch_size, l.tp, bytes, options);
    const auto stage_kernels = core::stage_kernels(local, range.first, range.end, kernel_options);
    work.kernels.insert(work.kernels.end(), stage_kernels.begin(), stage_kernels.end());
    work.forward_flops += cost.forward_flops;
    work.recompute_flops += cost.recompute_flops;
    work.layers += stage_layer_count(l.model, range);
    transformer_layers += range.end - range.first;
    working = std::max(working, cost.backward_working_bytes);
    params += cost.parameters;
    activations = std::max(activations, cost.activation_bytes);
    s.p2p_bytes = cost.boundary_bytes;
    s.tied_gradient_bytes = std::max(s.tied_gradient_bytes, 4.0 * cost.tied_copy_parameters);
    s.tp_allreduce_bytes = cost.tp_allreduce_bytes;
    s.tp_allreduces_per_op = cost.tp_allreduces_forward;  // per F (and per B) of one chunk
    s.tp_allreduces_recompute = full_recompute ? cost.tp_allreduces_forward : 0;
  }
  if (l.cp > 1) s.cp_ring.push_back(cp_ring_costs(l, local, work.kernels, transformer_layers, platform, bytes));
  if (calibration) push_calibrated_op_times(s, work, *calibration, l.world_size(), full_recompute);
  else push_roofline_op_times(s, std::move(work), platform);
  // The optimizer updates the rank's parameters (with ZeRO-1 its 1/dp of them): a
  // memory-bound kernel, free on a platform without a memory bandwidth.
  const double updated = params / (l.plan.zero_stage >= 1 ? s.dp : 1);
  s.optimizer_s = std::max(s.optimizer_s, calibration ? calibration->optimizer_s_per_parameter * updated
                                                      : memory_seconds(core::optimizer_bytes_per_parameter(bytes) * updated, platform));
  s.dp_grad_bytes.push_back(params * core::gradient_bytes_per_parameter(bytes, options));
  s.dp_gather_bytes.push_back(params * core::weight_bytes_per_parameter(bytes, options));
  // Activations: each microbatch in flight at the peak keeps its stored ones, plus what
  // one layer's backward holds while it runs (StageCost::backward_working_bytes), plus
  // the pipeline's buffers (core::pipeline_buffer_bytes).
  const bool sends_activations = r < l.pp - 1 || l.chunks > 1, sends_gradients = r > 0 || l.chunks > 1;
  const double buffers =
      core::pipeline_buffer_bytes(s.p2p_bytes, shape.peak_activations[r], sends_activations, sends_gradients);
  s.memory.push_back(core::rank_memory(params, activations * shape.peak_activations[r] + working + buffers,
                                       bytes == 4.0, options, s.dp));
  s.memory_bytes.push_back(s.memory.back().total());
}

}  // namespace

StepCosts make_step_costs(const core::RunLayout& l, const Platform& platform, const Calibration* calibration) {
  if (l.world_size() > platform.gpus())
    throw core::UserError("the mesh " + l.mesh.shape_string() + " needs " + std::to_string(l.world_size()) +
                          " GPUs; platform '" + platform.name + "' has " + std::to_string(platform.gpus()) + " (" +
                          std::to_string(platform.nodes) + " nodes x " + std::to_string(platform.gpus_per_node) +
                          ")" +
                          (platform.xml_file.empty() ? "; use --nodes" : ", the hosts of the XML file"));
  StepCosts s;
  s.model = l.model.name;
  s.tp = l.tp;
  s.dp = l.replicas();
  s.cp = l.cp;
  s.schedule = l.schedule;
  s.zero_stage = l.plan.zero_stage;
  s.step_end_collectives = true;
  s.dp_overlap = l.plan.dp_overlap;
  s.tp_overlap = l.plan.tp_overlap;
  s.pp_scatter_gather = l.plan.pp_scatter_gather;
  const core::ScheduleStats shape = core::simulate_schedule(s.schedule);
  for (int r = 0; r < l.pp; ++r) add_pipeline_rank(s, l, r, shape, platform, calibration);
  s.bucket_bytes = l.plan.bucket_size_mb * 1024 * 1024;
  s.samples_per_step = l.plan.batch_size;
  s.tokens_per_sample = l.model.seq;
  s.flops_per_step = core::training_flops_per_sample(l.model) * l.plan.batch_size;
  return s;
}

StepCosts uniform_step_costs(core::ScheduleKind kind, int pp, int microbatches, int chunks, double tf, double tb,
                         double tw, double p2p_bytes) {
  StepCosts s;
  s.model = "uniform";
  s.schedule = core::make_schedule(kind, pp, microbatches, chunks);
  s.forward_s.assign(pp, tf);
  s.backward_input_s.assign(pp, tb);
  s.backward_weight_s.assign(pp, tw);
  s.dp_grad_bytes.assign(pp, 0);
  s.dp_gather_bytes.assign(pp, 0);
  s.memory_bytes.assign(pp, 0);
  s.memory.assign(pp, {});
  s.p2p_bytes = p2p_bytes;
  s.samples_per_step = microbatches;
  return s;
}

}  // namespace quintnet::sim
