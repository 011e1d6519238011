// The ViT as core knows it: the original QuintNet's Vision Transformer (flat keys,
// MNIST-format images).  Its sizes and layer shapes for the cost model, its shape rules,
// its default data and its plan keys.  The executor's side is exec/models/vit.cpp.
#include "core/model_kind.h"
#include "core/plan_key_builders.h"

namespace quintnet::core {
namespace {

using namespace key_builders;
const std::string kSection = "Model: ViT";

void add_keys(std::vector<PlanKey>& keys) {
  auto add = [&](PlanKey k) { keys.push_back(std::move(k)); };
  add(integer("img_size", kSection, VitConfig::kName, 1, 1 << 16, QN_MODEL_FIELD(VitConfig, img_size), "image side in pixels"));
  add(integer("patch_size", kSection, VitConfig::kName, 1, 1 << 16, QN_MODEL_FIELD(VitConfig, patch_size), "patch side in pixels"));
  add(integer("hidden_dim", kSection, VitConfig::kName, 1, 1 << 20, QN_MODEL_FIELD(VitConfig, hidden_dim), "hidden size"));
  add(integer("in_channels", kSection, VitConfig::kName, 1, 1024, QN_MODEL_FIELD(VitConfig, in_channels), "image channels"));
  add(integer("n_heads", kSection, VitConfig::kName, 1, 1 << 16, QN_MODEL_FIELD(VitConfig, n_heads), "attention heads"));
  add(integer("depth", kSection, VitConfig::kName, 1, 1 << 16, QN_MODEL_FIELD(VitConfig, depth), "transformer blocks"));
  add(original(integer("num_classes", kSection, VitConfig::kName, 2, 1 << 20, QN_MODEL_FIELD(VitConfig, num_classes), "classes"), false));
  add(original(number("dropout", kSection, VitConfig::kName, 0.0, 0.99, QN_MODEL_FIELD(VitConfig, dropout), "dropout rate"), false));
}

}  // namespace

ModelKind vit_model_kind() {
  ModelKind k;
  k.name = VitConfig::kName;
  k.title = "a ViT";
  k.default_dataset = "/usr/share/datasets/fashion-mnist";
  k.layers_key = "depth", k.heads_key = "n_heads", k.hidden_key = "hidden_dim";
  k.key_section = kSection;
  k.add_keys = add_keys;
  k.defaults = VitConfig{};
  k.dims = [](const ModelConfig& m, int) {
    const VitConfig& c = m.as<VitConfig>();
    const int patches = (c.img_size / c.patch_size) * (c.img_size / c.patch_size);
    ModelDims d;
    d.name = "vit (plan)";
    d.inputs = Inputs::ImagePatches, d.head = Head::ClassTokenClassifier, d.causal = false;
    d.layers = c.depth, d.hidden = c.hidden_dim, d.heads = c.n_heads, d.ffn = 4 * c.hidden_dim;
    d.vocab = c.num_classes, d.seq = patches + 1, d.patch_inputs = c.patch_size * c.patch_size * c.in_channels;
    d.dropout = false;  // the executor's ViT applies none, whatever `dropout` says (docs/EXECUTOR.md)
    return d;
  };
  k.rules = [](const ModelConfig& m, int) {
    const VitConfig& c = m.as<VitConfig>();
    return std::vector<Divisibility>{
        {"img_size", c.img_size, "patch_size", c.patch_size, "choose a patch size that tiles the image"}};
  };
  return k;
}

}  // namespace quintnet::core

#undef QN_KEY_FIELD
#undef QN_MODEL_FIELD
