#include "core/model_kind.h"

#include "core/error.h"

namespace quintnet::core {

const std::vector<ModelKind>& model_kinds() {
  // One description per model, each in its own file (core/models/); the first is a
  // plan's model when it names none and has no model block.
  static const std::vector<ModelKind> kinds = {vit_model_kind(), gpt2_model_kind(), llama_model_kind()};
  return kinds;
}

std::string model_kind_names(const std::string& separator) {
  std::string out;
  for (const ModelKind& k : model_kinds()) out += (out.empty() ? "" : separator) + k.name;
  return out;
}

const ModelKind& model_kind(const std::string& name) {
  for (const ModelKind& k : model_kinds())
    if (k.name == name) return k;
  throw ConfigError("unknown model '" + name + "'; choose " + model_kind_names(" or "));
}

// A model's sizes do not depend on the sequence length the cost model is given.
std::string ModelConfig::kind() const {
  return std::visit([](const auto& c) { return std::string(std::decay_t<decltype(c)>::kName); }, settings_);
}

void ModelConfig::wrong_model(const char* asked) const {
  throw std::logic_error("the plan's model is " + kind() + ", not " + asked);
}

int ModelConfig::layers() const { return model_kind(kind()).dims(*this, 1).layers; }
int ModelConfig::heads() const { return model_kind(kind()).dims(*this, 1).heads; }
int ModelConfig::hidden() const { return model_kind(kind()).dims(*this, 1).hidden; }
int ModelConfig::mlp_hidden() const { return model_kind(kind()).dims(*this, 1).ffn; }

}  // namespace quintnet::core
