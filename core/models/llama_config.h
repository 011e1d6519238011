#pragma once
// A Llama-3-style decoder's settings: the `llama_config` block, in Hugging Face's
// LlamaConfig names.  Its description for core is core/models/llama.cpp; the executor's
// model is exec/models/llama.cpp.
namespace quintnet::core {

// Llama 3.1's rotary scaling (`rope_scaling` with rope_type "llama3"): frequencies whose
// wavelength exceeds original_max_position_embeddings / low_freq_factor are divided by
// `factor`, those shorter than ... / high_freq_factor kept, those between blended.
// factor 1 is no scaling (Llama 3, 3.0's plans).
struct RopeScaling {
  double factor = 1.0;
  double low_freq_factor = 1.0;
  double high_freq_factor = 4.0;
  int original_max_position_embeddings = 8192;
  bool scales() const { return factor != 1.0; }
};

struct LlamaConfig {
  static constexpr const char* kName = "llama";
  int vocab_size = 50257;
  int max_position_embeddings = 1024;  // rotary positions have no table: the longest sequence taken
  int hidden_size = 768;
  int num_hidden_layers = 12;
  int num_attention_heads = 12;
  int num_key_value_heads = 12;  // grouped-query attention: each serves heads / this many
  int intermediate_size = 3072;  // SwiGLU's width
  double rms_norm_eps = 1e-5;
  double rope_theta = 500000.0;
  RopeScaling rope_scaling;
  // The head's logits use the embedding's weights (Llama 3.2 1B and 3B); false: lm_head
  // is a weight of its own (8B and up).
  bool tie_word_embeddings = false;
};

}  // namespace quintnet::core
