#pragma once
// How a plan key is declared: the builders core/plan_keys.cpp and each model's
// description (core/models/) use to declare their keys once — name, section, type,
// range, help, and how the key is read into a Plan and written out of one.  Internal to
// core: nothing outside it declares keys.
#include <cmath>
#include <cstdint>
#include <optional>
#include <sstream>
#include <string>
#include <type_traits>
#include <utility>

#include "core/plan_keys.h"

namespace quintnet::core::key_builders {

constexpr std::int64_t kMaxCount = std::int64_t{1} << 31;

// The key as its reader sees it: model_config.n_head is n_head of the block's reader.
inline std::string leaf(const std::string& name) {
  const auto dot = name.find('.');
  return dot == std::string::npos ? name : name.substr(dot + 1);
}

inline std::string range_text(double lo, double hi) {
  std::ostringstream out;
  out << lo << " to ";
  const double power = std::log2(hi);
  if (hi > 1e6 && power == std::floor(power)) out << "2^" << static_cast<int>(power);
  else out << hi;
  return out.str();
}

inline PlanKey declare(std::string name, std::string section, std::string type, std::string range, std::string help) {
  PlanKey k;
  k.name = std::move(name);
  k.section = std::move(section);
  k.type = std::move(type);
  k.range = std::move(range);
  k.help = std::move(help);
  return k;
}

// Who writes a key: every plan (kEveryModel), or the plans of one model kind ("vit", "gpt2").
inline const std::string kEveryModel;
inline bool applies(const std::string& model, const Plan& p) { return model.empty() || model == p.model.kind(); }

// QN_KEY_FIELD(expr) names where a key lives: a function from a Plan to the member `p.expr`;
// QN_MODEL_FIELD(Config, member) one of a model's settings (read only into that model's plans).
#define QN_KEY_FIELD(expr) [](Plan& p) -> auto& { return p.expr; }
#define QN_MODEL_FIELD(Config, member) [](Plan& p) -> auto& { return p.model.as<Config>().member; }

template <typename Field>
PlanKey integer(std::string name, const std::string& section, const std::string& who, std::int64_t lo, std::int64_t hi,
                Field field, std::string help) {
  PlanKey k = declare(name, section, "integer", range_text(static_cast<double>(lo), static_cast<double>(hi)), std::move(help));
  k.model = who;
  k.read = [=](ConfigReader& r, Plan& p) {
    if (!applies(who, p)) return;  // another model's key (ViT's sit at the top level of every plan)
    auto& f = field(p);
    f = static_cast<std::decay_t<decltype(f)>>(r.get_int(leaf(name), static_cast<std::int64_t>(f), lo, hi));
  };
  k.value = [=](const Plan& p) {
    return applies(who, p) ? nlohmann::json(field(const_cast<Plan&>(p))) : nlohmann::json();
  };
  return k;
}

template <typename Field>
PlanKey number(std::string name, const std::string& section, const std::string& who, double lo, double hi, Field field,
               std::string help) {
  PlanKey k = declare(name, section, "number", range_text(lo, hi), std::move(help));
  k.model = who;
  k.read = [=](ConfigReader& r, Plan& p) {
    if (applies(who, p)) field(p) = r.get_double(leaf(name), field(p), lo, hi);
  };
  k.value = [=](const Plan& p) {
    return applies(who, p) ? nlohmann::json(field(const_cast<Plan&>(p))) : nlohmann::json();
  };
  return k;
}

// optional: written only when set (a path the plan may leave to its default).
template <typename Field>
PlanKey text(std::string name, const std::string& section, Field field, std::string help, bool optional = false) {
  PlanKey k = declare(name, section, "text", "", std::move(help));
  k.read = [=](ConfigReader& r, Plan& p) { field(p) = r.get_string(name, field(p)); };
  k.value = [=](const Plan& p) {
    const std::string& v = field(const_cast<Plan&>(p));
    return optional && v.empty() ? nlohmann::json() : nlohmann::json(v);
  };
  return k;
}

// One name out of an enum's (core/run_options.h); `noun` names the choice in messages:
// "unknown precision 'fp16'; choose fp32 or bf16".
template <typename Field>
PlanKey choice(std::string name, const std::string& section, Field field, const std::string& noun, std::string help) {
  using Enum = std::decay_t<decltype(field(std::declval<Plan&>()))>;
  PlanKey k = declare(name, section, "text", option_list<Enum>(", "), std::move(help));
  k.read = [=](ConfigReader& r, Plan& p) {
    const std::string text = r.get_string(name, name_of(field(p)));
    const std::optional<Enum> value = parse_option<Enum>(text);
    if (!value) r.fail(name, "unknown " + noun + " '" + text + "'; choose " + option_list<Enum>(" or "));
    field(p) = *value;
  };
  k.value = [=](const Plan& p) { return nlohmann::json(name_of(field(const_cast<Plan&>(p)))); };
  return k;
}

// A true/false key (none of the original configs had one); `who` as for integer().
template <typename Field>
PlanKey boolean(std::string name, const std::string& section, Field field, std::string help,
                const std::string& who = kEveryModel) {
  PlanKey k = declare(name, section, "true/false", "", std::move(help));
  k.original = false;
  k.model = who;
  k.read = [=](ConfigReader& r, Plan& p) {
    if (applies(who, p)) field(p) = r.get_bool(leaf(name), field(p));
  };
  k.value = [=](const Plan& p) {
    return applies(who, p) ? nlohmann::json(field(const_cast<Plan&>(p))) : nlohmann::json();
  };
  return k;
}

inline PlanKey original(PlanKey k, bool is_original) {
  k.original = is_original;
  return k;
}
inline PlanKey with_default(PlanKey k, std::string text) {
  k.default_text = std::move(text);
  return k;
}
inline PlanKey with_range(PlanKey k, std::string text) {
  k.range = std::move(text);
  return k;
}

}  // namespace quintnet::core::key_builders
