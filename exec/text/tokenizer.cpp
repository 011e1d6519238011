#include "exec/text/tokenizer.h"

#include <filesystem>

#include "core/error.h"
#include "core/install_layout.h"
#include "exec/text/bpe_tokenizer.h"
#include "exec/text/tiktoken_tokenizer.h"

namespace quintnet::text {

std::unique_ptr<Tokenizer> load_tokenizer(const std::string& given) {
  std::string path = given;
  if (!path.empty() && path.front() != '/' && !std::filesystem::exists(path) &&
      std::filesystem::exists(core::data_dir() + "/" + path))
    path = core::data_dir() + "/" + path;
  if (std::filesystem::is_directory(path)) return std::make_unique<BpeTokenizer>(BpeTokenizer::from_folder(path));
  if (!std::filesystem::exists(path))
    throw core::UserError(path + ": no tokenizer there (a folder of GPT-2's encoder.json + vocab.bpe, or a tiktoken ranks "
                                 "file such as data/js-tiktoken/dist/ranks/cl100k_base.cjs; scripts/setup.sh fetches both)");
  return std::make_unique<TiktokenTokenizer>(path);
}

}  // namespace quintnet::text
