// Everything a plan must satisfy before any process group exists.  Each failure is
// one ConfigError naming the key, the value and the fix.
#include <algorithm>
#include <sstream>

#include "core/error.h"
#include "core/model_kind.h"
#include "core/plan.h"

namespace quintnet::core {
namespace {

// Each strategy and the mesh axes it parallelises over: the one table of them.
const std::vector<std::pair<std::string, std::vector<Axis>>>& strategies() {
  using A = Axis;
  static const std::vector<std::pair<std::string, std::vector<Axis>>> table = {
      {"dp", {A::Dp}},           {"tp", {A::Tp}},           {"pp", {A::Pp}},           {"dp_tp", {A::Dp, A::Tp}},
      {"dp_pp", {A::Dp, A::Pp}}, {"tp_pp", {A::Tp, A::Pp}}, {"3d", {A::Dp, A::Tp, A::Pp}}};
  return table;
}

class Checker {
 public:
  explicit Checker(const Plan& p) : p_(p) {}

  [[noreturn]] void fail(const std::string& key, const std::string& msg) const {
    throw ConfigError(p_.source + ": " + key + ": " + msg);
  }

  // `what` must divide evenly by `by`.
  void divisible(const std::string& key, int value, const std::string& by_name, int by, const std::string& fix) const {
    if (by > 0 && value % by != 0) {
      std::ostringstream msg;
      msg << value << " is not divisible by " << by_name << " = " << by << "; " << fix;
      fail(key, msg.str());
    }
  }

  void check(std::optional<int> world_size) const {
    check_mesh(world_size);
    check_strategy();
    check_schedule();
    check_model();
    check_batch();
    check_context_parallel();
    check_memory_options();
  }

 private:
  void check_memory_options() const {
    if (p_.sequence_parallel && p_.tp() < 2)
      fail("sequence_parallel", "true needs tensor parallelism (tp > 1); the mesh has tp = 1");
    if (p_.sequence_parallel) {  // each tp rank holds an equal part of its (cp part of the) tokens
      const int tokens = model_kind(p_.model.kind()).dims(p_.model, p_.max_seq_length).seq / p_.cp();
      if (tokens % p_.tp() != 0)
        fail("sequence_parallel", "the " + std::to_string(tokens) + " tokens per sample" +
                                  (p_.cp() > 1 ? " on each cp rank" : std::string()) + " do not split evenly "
                                  "over tp " + std::to_string(p_.tp()) + "; choose a tp that divides them");
    }
    if (p_.zero_stage > 1)
      fail("zero_stage", std::to_string(p_.zero_stage) + " is not built (ZeRO-2/3 shard gradients and parameters too); "
                         "choose 0 or 1");
  }

  // Context parallelism: each cp rank holds 2 of the sequence's 2·cp equal chunks
  // (chunk i and chunk 2·cp − 1 − i, so that causal attention costs every rank alike).
  void check_context_parallel() const {
    const int cp = p_.cp();
    if (cp < 2) return;
    const ModelKind& kind = model_kind(p_.model.kind());
    if (!kind.context_parallel) {
      std::string which;
      for (const ModelKind& k : model_kinds())
        if (k.context_parallel) which += (which.empty() ? "" : " and ") + k.name;
      fail("mesh_dim", "cp = " + std::to_string(cp) + ", but " + kind.title + " has no context parallelism (only " +
                           which + " split their sequences); set cp to 1");
    }
    if (kind.context_parallel_requirements)
      for (const Requirement& r : kind.context_parallel_requirements(p_.model))
        if (!r.met) fail(r.key, r.message);
    divisible("max_seq_length", p_.max_seq_length, "2 x cp", 2 * cp,
              "each cp rank holds two equal chunks of every sequence");
  }

  void check_mesh(std::optional<int> world_size) const {
    Mesh mesh = [&] {
      try {
        return p_.mesh();
      } catch (const MeshError& e) {
        fail("mesh_dim", e.what());
      }
    }();
    if (world_size) {
      try {
        mesh.check_world_size(*world_size);
      } catch (const MeshError& e) {
        throw ConfigError(p_.source + ": " + e.what());
      }
    }
  }

  void check_strategy() const {
    const std::string s = p_.strategy();
    const auto axes = strategy_axes(s);
    if (axes.empty())
      fail("strategy_name", "unknown strategy '" + s + "'; choose one of dp, tp, pp, dp_tp, dp_pp, tp_pp, 3d");
    for (Axis a : all_axes())
      if (p_.size(a) > 1 && std::find(axes.begin(), axes.end(), a) == axes.end()) {
        const std::string& axis = name_of(a);
        fail("strategy_name", "'" + s + "' does not use the " + axis + " axis, but mesh_dim gives it size " +
                                  std::to_string(p_.size(a)) + "; set " + axis +
                                  " to 1 in mesh_dim or pick a strategy that includes " + axis +
                                  " (e.g. 3d)");
      }
  }

  void check_schedule() const {
    ScheduleKind kind;
    try {
      kind = p_.schedule_kind();
    } catch (const ConfigError& e) {
      throw ConfigError(p_.source + ": " + e.what());
    }
    const int pp = p_.pp(), m = p_.microbatches(), v = p_.virtual_stages;
    if (v > 1 && kind != ScheduleKind::Interleaved)
      fail("virtual_stages", std::to_string(v) + " chunks per rank need schedule: interleaved (schedule is '" +
                                 p_.schedule + "'); set virtual_stages: 1 or schedule: interleaved");
    if (kind == ScheduleKind::Interleaved && pp > 1 && m < pp)
      fail("grad_acc_steps", std::to_string(m) + " microbatches are fewer than the " + std::to_string(pp) +
                                 " pipeline stages; the interleaved schedule needs at least pp microbatches "
                                 "(set grad_acc_steps >= " + std::to_string(pp) + " or use schedule: 1f1b)");
  }

  void check_model() const {
    const ModelConfig& m = p_.model;
    const int tp = p_.tp(), pp = p_.pp(), v = p_.virtual_stages;
    const ModelKind& kind = model_kind(m.kind());
    const std::string& heads_key = kind.heads_key;
    const std::string& hidden_key = kind.hidden_key;
    divisible(hidden_key, m.hidden(), heads_key, m.heads(),
              "the hidden size must split evenly into attention heads");
    divisible(heads_key, m.heads(), "tp", tp, "tensor parallelism splits whole heads; pick tp dividing " +
                                                  std::to_string(m.heads()));
    divisible(hidden_key, m.hidden(), "tp", tp, "pick tp dividing " + std::to_string(m.hidden()));
    for (const Divisibility& rule : kind.rules(m, tp)) divisible(rule.key, rule.value, rule.by_key, rule.by, rule.fix);
    if (m.layers() < pp * v) {
      std::ostringstream msg;
      msg << m.layers() << " layers cannot fill " << pp * v << " pipeline stages (pp " << pp << " x "
          << v << " chunks); every stage needs at least one layer: reduce pp"
          << (v > 1 ? " or virtual_stages" : "") << ", or use more layers";
      fail(kind.layers_key, msg.str());
    }
  }

  void check_batch() const {
    const int dp = p_.dp(), m = p_.microbatches();
    const long long per_step = static_cast<long long>(m) * dp;
    if (p_.batch_size % per_step != 0) {
      std::ostringstream msg;
      const long long lo = (p_.batch_size / per_step) * per_step;
      msg << p_.batch_size << " is not divisible by grad_acc_steps x dp = " << m << " x " << dp << " = "
          << per_step << " (the global batch splits into grad_acc_steps microbatches on each of dp replicas); "
          << "use a multiple of " << per_step << " such as " << (lo > 0 ? lo : per_step) << " or "
          << lo + per_step;
      fail("batch_size", msg.str());
    }
  }

  const Plan& p_;
};

}  // namespace

std::vector<std::string> strategy_names() {
  std::vector<std::string> names;
  for (const auto& [name, axes] : strategies()) names.push_back(name);
  return names;
}

std::vector<Axis> strategy_axes(const std::string& strategy) {
  for (const auto& [name, axes] : strategies())
    if (name == strategy) return axes;
  return {};
}

void validate_plan(const Plan& plan, std::optional<int> world_size) { Checker(plan).check(world_size); }

}  // namespace quintnet::core
