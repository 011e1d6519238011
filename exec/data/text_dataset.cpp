#include "exec/data/text_dataset.h"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "core/error.h"

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
      if (word == "``" || word == "''") word = "\"";
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

TextDataset load_text_dataset(const std::string& path, const text::BpeTokenizer& tokenizer) {
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
  return {inputs.to(device), targets.to(device)};
}

}  // namespace quintnet::exec
