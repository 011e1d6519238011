#include "exec/models/registry.h"

#include <vector>

#include "core/error.h"
#include "exec/models/gpt2.h"
#include "exec/models/vit.h"

namespace quintnet::exec {
namespace {

std::vector<ModelEntry> make_entries() {
  ModelEntry vit;
  vit.kind = "vit";
  vit.make_serial = [](const core::Plan& p) { return ViT(p.model, TpContext{}).ptr(); };
  vit.load_data = load_image_data;
  // One token per patch, and the class token.
  vit.tokens = [](const core::Plan& p) {
    const int side = p.model.img_size / p.model.patch_size;
    return static_cast<std::int64_t>(side * side + 1);
  };
  vit.has_dropout = [](const core::ModelConfig& m) { return m.dropout > 0; };

  ModelEntry gpt2;
  gpt2.kind = "gpt2";
  gpt2.make_serial = [](const core::Plan& p) {
    Gpt2 gpt(p.model, TpContext{});
    if (!p.checkpoint_path.empty()) load_hf_gpt2(gpt, p.checkpoint_path);  // fine-tuning from released weights
    return gpt.ptr();
  };
  gpt2.load_data = load_text_data;
  gpt2.tokens = [](const core::Plan& p) { return static_cast<std::int64_t>(p.max_seq_length); };
  gpt2.has_dropout = [](const core::ModelConfig& m) { return m.attn_pdrop + m.embd_pdrop + m.resid_pdrop > 0; };
  gpt2.language_model = true;
  return {vit, gpt2};
}

}  // namespace

const ModelEntry& model_entry(const core::ModelConfig& model) {
  static const std::vector<ModelEntry> entries = make_entries();
  std::string known;
  for (const ModelEntry& e : entries) {
    if (e.kind == model.kind) return e;
    known += (known.empty() ? "" : ", ") + e.kind;
  }
  throw core::UserError("model: '" + model.kind + "' is not a model this executor trains (" + known + ")");
}

}  // namespace quintnet::exec
