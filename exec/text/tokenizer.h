#pragma once
// What the data loaders and generation need of a tokenizer, whichever it is: GPT-2's
// byte-level BPE (BpeTokenizer: encoder.json + vocab.bpe) or a tiktoken encoding such as
// cl100k_base (TiktokenTokenizer: the ranks file of the js-tiktoken npm package, or a
// .tiktoken file).  Both encode exactly as their reference JavaScript encoders do
// (tests/text/).
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace quintnet::text {

class Tokenizer {
 public:
  virtual ~Tokenizer() = default;
  virtual std::vector<std::int32_t> encode(std::string_view text) const = 0;
  virtual std::string decode(const std::vector<std::int32_t>& ids) const = 0;  // throws on an unknown id
  virtual int vocab_size() const = 0;  // one past the largest id, special tokens included
  virtual std::int32_t end_of_text() const = 0;  // "<|endoftext|>": the document separator
};

// `path`: a folder of GPT-2's files, or a tiktoken ranks file (.js/.cjs/.json of
// js-tiktoken's ranks/, or .tiktoken); a relative path not found from the working
// directory is looked up in the data folder (core::data_dir()).  Throws core::UserError
// naming what it expected.
std::unique_ptr<Tokenizer> load_tokenizer(const std::string& path);

}  // namespace quintnet::text
