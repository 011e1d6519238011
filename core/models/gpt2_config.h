#pragma once
// GPT-2's settings: the original's `model_config` block, in Hugging Face's GPT2Config
// names.  Its description for core is core/models/gpt2.cpp; the executor's model is
// exec/models/gpt2.cpp.
namespace quintnet::core {

struct Gpt2Config {
  static constexpr const char* kName = "gpt2";
  int vocab_size = 50257;
  int n_positions = 1024;  // positions the model embeds: its longest sequence
  int n_embd = 768;
  int n_layer = 12;
  int n_head = 12;
  int n_inner = 3072;
  double layer_norm_epsilon = 1e-5;
  double attn_pdrop = 0.1;
  double embd_pdrop = 0.1;
  double resid_pdrop = 0.1;
};

}  // namespace quintnet::core
