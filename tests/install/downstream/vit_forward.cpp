// QuintNet::exec from an installed prefix: the serial ViT of the default plan maps a
// batch of MNIST-sized images to class logits.  Exits 1 on a wrong shape.
#include <torch/torch.h>

#include <cstdio>

#include "core/plan.h"
#include "exec/models/vit.h"

using namespace quintnet;

int main() {
  torch::manual_seed(0);
  core::VitConfig config;  // the original's ViT: 28x28, patch 4, 64 wide, depth 8
  exec::ViT vit(config, exec::TpContext{});
  const torch::Tensor logits = vit->forward(torch::randn({2, config.in_channels, config.img_size, config.img_size}));
  std::printf("ViT logits %lld x %lld\n", static_cast<long long>(logits.size(0)), static_cast<long long>(logits.size(1)));
  return logits.dim() == 2 && logits.size(0) == 2 && logits.size(1) == config.num_classes ? 0 : 1;
}
