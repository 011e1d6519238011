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

#include "exec/text/bpe_tokenizer.h"

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
TextDataset load_text_dataset(const std::string& path, const text::BpeTokenizer& tokenizer);

// "The/at jury/nn said/vbd ``/`` no/at ''/'' ./." -> "The jury said \"no\"."
std::string brown_to_text(const std::string& tagged);

// inputs and targets [n, T] (int64) for the given sequence indices, on `device`.
std::pair<torch::Tensor, torch::Tensor> make_token_batch(const TokenStream& stream, const std::vector<int64_t>& indices,
                                                         int64_t seq_len, torch::Device device = torch::kCPU);

}  // namespace quintnet::exec
