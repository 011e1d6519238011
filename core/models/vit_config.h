#pragma once
// The ViT's settings: the original QuintNet's flat config keys, under their names.  Its
// description for core (sizes, shape rules, plan keys) is core/models/vit.cpp; the
// executor's model is exec/models/vit.cpp.
namespace quintnet::core {

struct VitConfig {
  static constexpr const char* kName = "vit";  // the plan's `model`
  int img_size = 28;
  int patch_size = 4;
  int hidden_dim = 64;
  int in_channels = 1;
  int n_heads = 4;
  int depth = 8;
  int num_classes = 10;
  double dropout = 0.0;
};

}  // namespace quintnet::core
