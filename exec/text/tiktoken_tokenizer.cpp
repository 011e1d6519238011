#include "exec/text/tiktoken_tokenizer.h"

#include <climits>
#include <sstream>

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "exec/text/unicode_classes.h"
#include "exec/text/utf8.h"

namespace quintnet::text {
namespace {

using core::UserError;

// Standard base64 (with '=' padding); false on a character outside the alphabet.
bool base64_decode(const std::string& in, std::string& out) {
  out.clear();
  unsigned value = 0;
  int bits = 0;
  for (char c : in) {
    int v;
    if (c >= 'A' && c <= 'Z') v = c - 'A';
    else if (c >= 'a' && c <= 'z') v = c - 'a' + 26;
    else if (c >= '0' && c <= '9') v = c - '0' + 52;
    else if (c == '+') v = 62;
    else if (c == '/') v = 63;
    else if (c == '=') break;
    else return false;
    value = (value << 6) | static_cast<unsigned>(v);
    bits += 6;
    if (bits >= 8) {
      bits -= 8;
      out += static_cast<char>((value >> bits) & 0xff);
    }
  }
  return true;
}

bool is_newline(char32_t c) { return c == U'\r' || c == U'\n'; }

// The length of the piece the pattern matches at `i` (see the header's pattern).
size_t piece_length(const std::u32string& cps, size_t i) {
  const size_t n = cps.size();
  auto at = [&](size_t k) { return k < n ? cps[k] : 0; };
  auto run = [&](size_t from, bool (*in_class)(char32_t)) {
    size_t j = from;
    while (j < n && in_class(cps[j])) ++j;
    return j - from;
  };
  const char32_t c = cps[i], next = at(i + 1), after = at(i + 2);
  auto lower = [](char32_t x) { return x >= U'A' && x <= U'Z' ? x + 32 : x; };
  if (c == U'\'') {  // contractions, either case
    const char32_t a = lower(next), b = lower(after);
    if (a == U's' || a == U't' || a == U'm' || a == U'd') return 2;
    if (((a == U'r' || a == U'v') && b == U'e') || (a == U'l' && b == U'l')) return 3;
  }
  if (is_letter(c)) return run(i, &is_letter);
  if (!is_newline(c) && !is_number(c) && is_letter(next)) return 1 + run(i + 1, &is_letter);
  if (is_number(c)) return std::min<size_t>(3, run(i, &is_number));
  size_t len = 0;
  if (is_other(c)) len = run(i, &is_other);
  else if (c == U' ' && is_other(next)) len = 1 + run(i + 1, &is_other);
  if (len > 0) return len + run(i + len, &is_newline);
  // Whitespace: up to its last line break if it holds one; else \s+(?!\S) leaves the
  // last space to what follows, unless the run ends the text or is one character.
  const size_t k = run(i, &is_space);
  for (size_t j = k; j > 0; --j)
    if (is_newline(cps[i + j - 1])) return j;
  return (i + k == n || k == 1) ? k : k - 1;
}

}  // namespace

std::vector<std::string> TiktokenTokenizer::split(std::string_view text) {
  const std::u32string cps = decode_utf8(text);
  std::vector<std::string> pieces;
  for (size_t i = 0; i < cps.size();) {
    const size_t len = piece_length(cps, i);
    std::string piece;
    for (size_t k = i; k < i + len; ++k) append_utf8(piece, cps[k]);
    pieces.push_back(std::move(piece));
    i += len;
  }
  return pieces;
}

void TiktokenTokenizer::add_rank(const std::string& bytes, std::int32_t rank, const std::string& where) {
  if (rank < 0 || !rank_of_.emplace(bytes, rank).second)
    throw UserError(where + ": rank " + std::to_string(rank) + " repeats a token or is negative");
  if (static_cast<size_t>(rank) >= bytes_of_.size()) bytes_of_.resize(static_cast<size_t>(rank) + 1);
  bytes_of_[static_cast<size_t>(rank)] = bytes;
}

TiktokenTokenizer::TiktokenTokenizer(const std::string& path) {
  const std::string text = read_tokenizer_file(path);
  auto bad = [&](const std::string& what) { return UserError(path + ": " + what); };
  std::string bytes;
  if (path.size() > 9 && path.substr(path.size() - 9) == ".tiktoken") {  // "base64 rank" lines
    std::istringstream lines(text);
    std::string token;
    std::int64_t rank;
    for (int line = 1; lines >> token >> rank; ++line) {
      if (!base64_decode(token, bytes)) throw bad("line " + std::to_string(line) + ": not base64");
      add_rank(bytes, static_cast<std::int32_t>(rank), path);
    }
    special_[static_cast<std::int32_t>(bytes_of_.size())] = "<|endoftext|>";
  } else {  // js-tiktoken's ranks: lines "<mark> <first rank> <base64> <base64> ..."
    const size_t open = text.find('{'), close = text.rfind('}');
    const nlohmann::json doc = nlohmann::json::parse(
        open == std::string::npos ? std::string() : text.substr(open, close - open + 1), nullptr, false);
    if (!doc.is_object() || !doc.contains("bpe_ranks") || !doc["bpe_ranks"].is_string())
      throw bad("expected js-tiktoken's ranks ({pat_str, special_tokens, bpe_ranks}) or a .tiktoken file");
    std::istringstream lines(doc["bpe_ranks"].get<std::string>());
    for (std::string line; std::getline(lines, line);) {
      std::istringstream fields(line);
      std::string mark, token;
      std::int64_t rank;
      if (!(fields >> mark >> rank)) continue;
      for (; fields >> token; ++rank) {
        if (!base64_decode(token, bytes)) throw bad("a token that is not base64: " + token);
        add_rank(bytes, static_cast<std::int32_t>(rank), path);
      }
    }
    const nlohmann::json specials = doc.value("special_tokens", nlohmann::json::object());
    for (const auto& [name, id] : specials.items()) {
      if (!id.is_number_integer()) throw bad("special token " + name + ": expected an id");
      special_[id.get<std::int32_t>()] = name;
    }
  }
  if (rank_of_.size() < 256) throw bad("fewer than 256 ranked tokens: not a byte-level encoding");
  vocab_size_ = static_cast<int>(bytes_of_.size());
  for (const auto& [id, name] : special_) {
    vocab_size_ = std::max(vocab_size_, id + 1);
    if (name == "<|endoftext|>") end_of_text_ = id;
  }
}

void TiktokenTokenizer::merge(const std::string& piece, std::vector<std::int32_t>& ids) const {
  if (auto whole = rank_of_.find(piece); whole != rank_of_.end()) {
    ids.push_back(whole->second);
    return;
  }
  std::vector<std::string> parts;
  for (char b : piece) parts.emplace_back(1, b);
  for (;;) {
    std::int32_t best = INT_MAX;
    size_t best_at = 0;
    for (size_t i = 0; i + 1 < parts.size(); ++i) {
      auto it = rank_of_.find(parts[i] + parts[i + 1]);
      if (it != rank_of_.end() && it->second < best) best = it->second, best_at = i;
    }
    if (best == INT_MAX) break;
    parts[best_at] += parts[best_at + 1];
    parts.erase(parts.begin() + static_cast<long>(best_at) + 1);
  }
  for (const std::string& part : parts) {
    auto it = rank_of_.find(part);
    if (it == rank_of_.end()) throw UserError("tokenizer: the byte sequence of a part has no rank (an incomplete ranks file?)");
    ids.push_back(it->second);
  }
}

std::vector<std::int32_t> TiktokenTokenizer::encode(std::string_view text) const {
  std::vector<std::int32_t> ids;
  for (const std::string& piece : split(text)) merge(piece, ids);
  return ids;
}

std::string TiktokenTokenizer::decode(const std::vector<std::int32_t>& ids) const {
  std::string out;
  for (std::int32_t id : ids) {
    if (auto special = special_.find(id); special != special_.end()) {
      out += special->second;
    } else if (id >= 0 && static_cast<size_t>(id) < bytes_of_.size() && !bytes_of_[static_cast<size_t>(id)].empty()) {
      out += bytes_of_[static_cast<size_t>(id)];
    } else {
      throw UserError("tokenizer: id " + std::to_string(id) + " is not in the vocabulary");
    }
  }
  return out;
}

}  // namespace quintnet::text
