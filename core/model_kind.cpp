#include "core/model_kind.h"

#include "core/error.h"

namespace quintnet::core {

const std::vector<ModelKind>& model_kinds() {
  static const std::vector<ModelKind> kinds = {
      // The original QuintNet's Vision Transformer: flat keys, MNIST-format images.
      {"vit", "a ViT", "", "/usr/share/datasets/fashion-mnist", "depth", "n_heads", "hidden_dim",
       [](const ModelConfig& c, int) {
         const int patches = (c.img_size / c.patch_size) * (c.img_size / c.patch_size);
         ModelDims d{"vit (plan)", true, c.depth, c.hidden_dim, c.n_heads, 4 * c.hidden_dim, c.num_classes,
                     patches + 1, c.patch_size * c.patch_size * c.in_channels};
         d.dropout = false;  // the executor's ViT applies none, whatever `dropout` says (docs/EXECUTOR.md)
         return d;
       },
       [](const ModelConfig& c, int) {
         return std::vector<Divisibility>{
             {"img_size", c.img_size, "patch_size", c.patch_size, "choose a patch size that tiles the image"}};
       }},
      // GPT-2: the original's model_config block; text from the executor's data/ folder.
      {"gpt2", "GPT-2", "model_config", "", "model_config.n_layer", "model_config.n_head", "model_config.n_embd",
       [](const ModelConfig& c, int seq_len) {
         ModelDims d{"gpt2 (plan)", false, c.n_layer, c.n_embd, c.n_head, c.n_inner, c.vocab_size, seq_len, 0};
         d.dropout = c.attn_pdrop + c.resid_pdrop + c.embd_pdrop > 0;
         return d;
       },
       [](const ModelConfig& c, int tp) {
         return std::vector<Divisibility>{
             {"model_config.n_inner", c.n_inner, "tp", tp, "pick tp dividing " + std::to_string(c.n_inner)}};
       }},
  };
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
int ModelConfig::layers() const { return model_kind(kind).dims(*this, 1).layers; }
int ModelConfig::heads() const { return model_kind(kind).dims(*this, 1).heads; }
int ModelConfig::hidden() const { return model_kind(kind).dims(*this, 1).hidden; }
int ModelConfig::mlp_hidden() const { return model_kind(kind).dims(*this, 1).ffn; }

}  // namespace quintnet::core
