#pragma once
// Plain text for language modelling: files (or every file under a folder, in name
// order) -> GPT-2 tokens -> fixed-length sequences.
//
// Documents are joined with <|endoftext|> into one token stream per split; every tenth
// document (the 10th, 20th, ...) goes to validation, so both splits see every genre of a
// corpus sorted by genre.  Sequence i of a split is tokens [i·T, i·T + T] (T + 1
// tokens: inputs are the first T, targets the last T).  The Brown corpus's word/TAG
// annotation is recognised and stripped back to running text.
#include <torch/torch.h>

#include <cstdint>
#include <string>
#include <vector>

#include "exec/text/tokenizer.h"

namespace quintnet::exec {

struct TokenStream {
  std::vector<std::int32_t> tokens;
  int64_t sequences(int64_t seq_len) const {
    return tokens.size() > 1 ? static_cast<int64_t>((tokens.size() - 1) / seq_len) : 0;
  }
};

struct TextDataset {
  TokenStream train, val;
  int documents = 0;
};

// Throws core::UserError for a missing path or one without text.
TextDataset load_text_dataset(const std::string& path, const text::Tokenizer& tokenizer);

// Summarization examples from JSONL ({"article": ..., "summary": ...} per line), as the
// original trains GPT-2: "article TL;DR: summary<|endoftext|>", the article cut so the
// whole fits max_seq_length + 1 tokens, the summary cut to max_target_length; the loss
// counts only the summary's tokens (targets elsewhere and in the padding are -1).  Every
// tenth example is validation.
struct SummaryDataset {
  std::vector<std::int32_t> train_tokens, val_tokens;  // examples of seq_len + 1 tokens each
  std::vector<std::int8_t> train_scored, val_scored;   // 1 where the token is a target to learn
  int64_t train_count = 0, val_count = 0;
};
SummaryDataset load_summary_dataset(const std::string& jsonl_path, const text::Tokenizer& tokenizer,
                                    int64_t seq_len, int64_t max_target_length);
// inputs and targets [n, T] of examples `indices`; unscored targets are -1.
std::pair<torch::Tensor, torch::Tensor> make_summary_batch(const std::vector<std::int32_t>& tokens,
                                                           const std::vector<std::int8_t>& scored,
                                                           const std::vector<int64_t>& indices, int64_t seq_len,
                                                           torch::Device device = torch::kCPU);

// "The/at jury/nn said/vbd ``/`` no/at ''/'' ./." -> "The jury said \"no\"."
std::string brown_to_text(const std::string& tagged);

// inputs and targets [n, T] (int64) for the given sequence indices, on `device`.
std::pair<torch::Tensor, torch::Tensor> make_token_batch(const TokenStream& stream, const std::vector<int64_t>& indices,
                                                         int64_t seq_len, torch::Device device = torch::kCPU);

}  // namespace quintnet::exec
