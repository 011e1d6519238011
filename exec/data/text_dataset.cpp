#include "exec/data/text_dataset.h"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <sstream>

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "exec/data/to_device.h"

namespace quintnet::exec {
namespace {

namespace fs = std::filesystem;

std::string read_text(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  if (!in) throw core::UserError(p.string() + ": cannot read the text file");
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

// A Brown corpus file: every whitespace-separated token carries a /tag.
bool looks_tagged(const std::string& text) {
  std::istringstream words(text);
  int seen = 0, tagged = 0;
  for (std::string w; seen < 200 && words >> w; ++seen) tagged += w.find('/') != std::string::npos && w.back() != '/';
  return seen >= 20 && tagged * 10 >= seen * 9;
}

}  // namespace

std::string brown_to_text(const std::string& tagged) {
  std::string out;
  std::istringstream lines(tagged);
  bool open_quote = false;
  for (std::string line; std::getline(lines, line);) {
    std::istringstream words(line);
    std::string sentence;
    for (std::string w; words >> w;) {
      const auto slash = w.rfind('/');
      std::string word = slash == std::string::npos ? w : w.substr(0, slash);
      if (word == "``" || word == "''") word.assign(1, '"');
      const bool closes = word.size() == 1 && std::string(",.;:?!)").find(word[0]) != std::string::npos;
      const bool quote = word == "\"";
      if (quote) open_quote = !open_quote;
      const bool glue_left = closes || (quote && !open_quote) || (!sentence.empty() && sentence.back() == '(') ||
                             (!sentence.empty() && sentence.back() == '"' && open_quote && !quote);
      if (!sentence.empty() && !glue_left) sentence += ' ';
      sentence += word;
    }
    if (sentence.empty()) {  // a blank line ends a paragraph
      if (!out.empty() && out.back() != '\n') out += "\n\n";
      continue;
    }
    if (!out.empty() && out.back() != '\n') out += ' ';
    out += sentence;
  }
  while (!out.empty() && out.back() == '\n') out.pop_back();
  return out;
}

TextDataset load_text_dataset(const std::string& path, const text::Tokenizer& tokenizer) {
  std::vector<fs::path> files;
  if (fs::is_directory(path)) {
    for (const auto& e : fs::recursive_directory_iterator(path))
      if (e.is_regular_file() && e.path().filename().string()[0] != '.') files.push_back(e.path());
    std::sort(files.begin(), files.end());
  } else if (fs::is_regular_file(path)) {
    files.push_back(path);
  } else {
    throw core::UserError("dataset_path: " + path + " is neither a text file nor a folder");
  }
  // A folder holding the tagged Brown corpus also holds its index files (CONTENTS,
  // cats.txt, ...): when any file is tagged, only the tagged files are the corpus.
  std::vector<std::string> texts;
  std::vector<bool> tagged;
  for (const fs::path& f : files) {
    texts.push_back(read_text(f));
    tagged.push_back(looks_tagged(texts.back()));
  }
  const bool corpus_is_tagged = std::find(tagged.begin(), tagged.end(), true) != tagged.end();
  TextDataset d;
  for (size_t i = 0; i < texts.size(); ++i) {
    if (corpus_is_tagged && !tagged[i]) continue;
    if (texts[i].find('\0') != std::string::npos) continue;  // a binary file, not text
    const std::string text = tagged[i] ? brown_to_text(texts[i]) : texts[i];
    if (text.empty()) continue;
    TokenStream& split = (d.documents % 10 == 9) ? d.val : d.train;
    const auto ids = tokenizer.encode(text);
    split.tokens.insert(split.tokens.end(), ids.begin(), ids.end());
    split.tokens.push_back(tokenizer.end_of_text());
    ++d.documents;
  }
  if (d.documents == 0) throw core::UserError("dataset_path: no text found in " + path);
  return d;
}

SummaryDataset load_summary_dataset(const std::string& path, const text::Tokenizer& tokenizer, int64_t seq_len,
                                    int64_t max_target_length) {
  std::ifstream in(path);
  if (!in) throw core::UserError("dataset_path: cannot read " + path);
  const std::vector<std::int32_t> separator = tokenizer.encode(" TL;DR: ");
  const int64_t width = seq_len + 1;
  SummaryDataset d;
  int64_t examples = 0, line_no = 0;
  for (std::string line; std::getline(in, line);) {
    ++line_no;
    if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
    nlohmann::json j;
    try {
      j = nlohmann::json::parse(line);
    } catch (const nlohmann::json::exception& e) {
      throw core::UserError(path + ":" + std::to_string(line_no) + ": not valid JSON (" + e.what() + ")");
    }
    if (!j.is_object() || !j.contains("article") || !j["article"].is_string() || !j.contains("summary") ||
        !j["summary"].is_string())
      throw core::UserError(path + ":" + std::to_string(line_no) + ": expected {\"article\": text, \"summary\": text}");
    std::vector<std::int32_t> summary = tokenizer.encode(j["summary"].get<std::string>());
    if (static_cast<int64_t>(summary.size()) > max_target_length) summary.resize(static_cast<size_t>(max_target_length));
    summary.push_back(tokenizer.end_of_text());
    const int64_t room = width - static_cast<int64_t>(separator.size() + summary.size());
    if (room < 1)
      throw core::UserError("max_seq_length " + std::to_string(seq_len) + " leaves no room for the article beside a " +
                            std::to_string(summary.size()) + "-token summary; raise it or lower max_target_length");
    std::vector<std::int32_t> article = tokenizer.encode(j["article"].get<std::string>());
    if (static_cast<int64_t>(article.size()) > room) article.resize(static_cast<size_t>(room));
    const bool val = examples % 10 == 9;
    auto& tokens = val ? d.val_tokens : d.train_tokens;
    auto& scored = val ? d.val_scored : d.train_scored;
    const size_t start = tokens.size();
    tokens.insert(tokens.end(), article.begin(), article.end());
    tokens.insert(tokens.end(), separator.begin(), separator.end());
    const size_t first_summary = tokens.size() - start;
    tokens.insert(tokens.end(), summary.begin(), summary.end());
    const size_t used = tokens.size() - start;
    tokens.resize(start + static_cast<size_t>(width), tokenizer.end_of_text());  // padding
    for (size_t k = 0; k < static_cast<size_t>(width); ++k) scored.push_back(k >= first_summary && k < used ? 1 : 0);
    ++(val ? d.val_count : d.train_count);
    ++examples;
  }
  if (examples == 0) throw core::UserError("dataset_path: no examples in " + path);
  return d;
}

std::pair<torch::Tensor, torch::Tensor> make_summary_batch(const std::vector<std::int32_t>& tokens,
                                                           const std::vector<std::int8_t>& scored,
                                                           const std::vector<int64_t>& indices, int64_t seq_len,
                                                           torch::Device device) {
  const int64_t n = static_cast<int64_t>(indices.size()), width = seq_len + 1;
  torch::Tensor inputs = torch::empty({n, seq_len}, torch::kLong), targets = torch::empty({n, seq_len}, torch::kLong);
  auto in = inputs.accessor<int64_t, 2>();
  auto out = targets.accessor<int64_t, 2>();
  for (int64_t i = 0; i < n; ++i) {
    const size_t start = static_cast<size_t>(indices[i] * width);
    for (int64_t t = 0; t < seq_len; ++t) {
      in[i][t] = tokens[start + t];
      out[i][t] = scored[start + t + 1] ? tokens[start + t + 1] : -1;
    }
  }
  return {to_device(inputs, device), to_device(targets, device)};
}

std::pair<torch::Tensor, torch::Tensor> make_token_batch(const TokenStream& stream, const std::vector<int64_t>& indices,
                                                         int64_t seq_len, torch::Device device) {
  const int64_t n = static_cast<int64_t>(indices.size());
  torch::Tensor inputs = torch::empty({n, seq_len}, torch::kLong), targets = torch::empty({n, seq_len}, torch::kLong);
  auto in = inputs.accessor<int64_t, 2>();
  auto out = targets.accessor<int64_t, 2>();
  for (int64_t i = 0; i < n; ++i) {
    const size_t start = static_cast<size_t>(indices[i] * seq_len);
    for (int64_t t = 0; t < seq_len; ++t) {
      in[i][t] = stream.tokens[start + t];
      out[i][t] = stream.tokens[start + t + 1];
    }
  }
  return {to_device(inputs, device), to_device(targets, device)};
}

}  // namespace quintnet::exec
