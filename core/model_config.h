#pragma once
// core::ModelConfig — the plan's model: exactly one model's settings, each model's in its
// own struct and in its own names (core/models/<name>_config.h).  Code that builds or
// describes one model asks for its struct (`config.as<Gpt2Config>()`); code that serves
// every model asks the sizes every model has (layers(), heads(), ...), which come from the
// model's description (core/model_kind.h), never from a branch on the kind.
#include <stdexcept>
#include <string>
#include <type_traits>
#include <utility>
#include <variant>

#include "core/models/gpt2_config.h"
#include "core/models/llama_config.h"
#include "core/models/vit_config.h"

namespace quintnet::core {

class ModelConfig {
 public:
  // One alternative per model; its order is model_kinds()' (core/model_kind.cpp).
  using Settings = std::variant<VitConfig, Gpt2Config, LlamaConfig>;

  ModelConfig() = default;  // the ViT, with its defaults
  // From one model's settings: `plan.model = Gpt2Config{}`.
  template <typename Config, typename = std::enable_if_t<std::is_constructible_v<Settings, Config>>>
  ModelConfig(Config config) : settings_(std::move(config)) {}

  std::string kind() const;  // the model's name: "vit", "gpt2", "llama"
  template <typename Config>
  bool is() const {
    return std::holds_alternative<Config>(settings_);
  }
  // The settings of the model this is; asking for another model's is a program error.
  template <typename Config>
  const Config& as() const {
    if (!is<Config>()) wrong_model(Config::kName);
    return std::get<Config>(settings_);
  }
  template <typename Config>
  Config& as() {
    if (!is<Config>()) wrong_model(Config::kName);
    return std::get<Config>(settings_);
  }

  // The sizes every model has (from its description: core/model_kind.h).
  int layers() const;
  int heads() const;
  int hidden() const;
  int mlp_hidden() const;

 private:
  [[noreturn]] void wrong_model(const char* asked) const;
  Settings settings_;
};

}  // namespace quintnet::core
