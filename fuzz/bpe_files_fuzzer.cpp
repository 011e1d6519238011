// GPT-2's vocabulary files: the input, split at its first NUL byte, is encoder.json and
// vocab.bpe.  They load (and encode and decode a sentence) or fail with core::UserError.
#include <cstdint>

#include "core/error.h"
#include "exec/text/bpe_tokenizer.h"
#include "fuzz/fuzz_support.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, size_t size) {
  const auto [encoder, merges] = quintnet::fuzz::split_at_nul(data, size);
  const std::string& dir = quintnet::fuzz::scratch_dir();
  quintnet::fuzz::write_bytes(dir + "/encoder.json", encoder);
  quintnet::fuzz::write_bytes(dir + "/vocab.bpe", merges);
  try {
    const auto tokenizer = quintnet::text::BpeTokenizer::from_folder(dir);
    tokenizer.decode(tokenizer.encode("the pipeline stage sends activations"));
  } catch (const quintnet::core::UserError&) {
  }
  return 0;
}
