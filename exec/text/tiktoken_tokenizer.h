#pragma once
// A tiktoken encoding (cl100k_base: GPT-4's, the family Llama 3's tokenizer extends):
// ranked byte sequences, merged by tiktoken's rule, after its pre-tokenizer pattern
//   's|'t|'re|'ve|'m|'ll|'d (either case) | [^\r\n\p{L}\p{N}]?\p{L}+ | \p{N}{1,3}
//   | ?[^\s\p{L}\p{N}]+[\r\n]* | \s*[\r\n]+ | \s+(?!\S) | \s+
// (the one cl100k_base, o200k-less, ships with).  Encoding, as tiktoken's:
//   1. the text is split by the pattern; a piece that is itself a token is that token,
//   2. otherwise its bytes are merged pairwise, the adjacent pair whose joined bytes have
//      the lowest rank first (the leftmost among equals), until no joined pair is ranked,
//   3. each part's rank is its id.
// Special tokens (<|endoftext|> 100257, ...) are never produced from text (tiktoken's
// encode_ordinary); decode turns them back into their names.
#include <map>
#include <string>
#include <unordered_map>
#include <vector>

#include "exec/text/tokenizer.h"

namespace quintnet::text {

class TiktokenTokenizer : public Tokenizer {
 public:
  // js-tiktoken's ranks module ("export default {pat_str, special_tokens, bpe_ranks}" or
  // its JSON), or a .tiktoken file ("base64 rank" per line; <|endoftext|> after the last
  // rank).  Throws core::UserError naming the file.
  explicit TiktokenTokenizer(const std::string& path);

  std::vector<std::int32_t> encode(std::string_view text) const override;
  std::string decode(const std::vector<std::int32_t>& ids) const override;
  int vocab_size() const override { return vocab_size_; }
  std::int32_t end_of_text() const override { return end_of_text_; }

  // The pre-tokenizer's pieces (step 1), as UTF-8; exposed for tests.
  static std::vector<std::string> split(std::string_view text);

 private:
  void add_rank(const std::string& bytes, std::int32_t rank, const std::string& where);
  void merge(const std::string& piece, std::vector<std::int32_t>& ids) const;

  std::unordered_map<std::string, std::int32_t> rank_of_;
  std::vector<std::string> bytes_of_;        // by id ("" for ids no token has)
  std::map<std::int32_t, std::string> special_;  // id -> name
  int vocab_size_ = 0;
  std::int32_t end_of_text_ = -1;
};

}  // namespace quintnet::text
