#include "exec/text/utf8.h"

#include <fstream>
#include <sstream>

#include "core/error.h"

namespace quintnet::text {

std::string read_tokenizer_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw core::UserError(path + ": cannot open the tokenizer file");
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

void append_utf8(std::string& out, char32_t cp) {
  if (cp < 0x80) {
    out += static_cast<char>(cp);
  } else if (cp < 0x800) {
    out += static_cast<char>(0xc0 | (cp >> 6));
    out += static_cast<char>(0x80 | (cp & 0x3f));
  } else if (cp < 0x10000) {
    out += static_cast<char>(0xe0 | (cp >> 12));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3f));
    out += static_cast<char>(0x80 | (cp & 0x3f));
  } else {
    out += static_cast<char>(0xf0 | (cp >> 18));
    out += static_cast<char>(0x80 | ((cp >> 12) & 0x3f));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3f));
    out += static_cast<char>(0x80 | (cp & 0x3f));
  }
}

// UTF-8 to code points with the WHATWG decoder's error handling: each maximal invalid
// subsequence becomes one U+FFFD (what TextDecoder and Node's file reading do).
std::u32string decode_utf8(std::string_view s) {
  std::u32string out;
  out.reserve(s.size());
  size_t i = 0;
  while (i < s.size()) {
    const unsigned char b = static_cast<unsigned char>(s[i]);
    if (b < 0x80) {
      out += b;
      ++i;
      continue;
    }
    int need = 0;
    char32_t cp = 0;
    unsigned char lo = 0x80, hi = 0xbf;
    if (b >= 0xc2 && b <= 0xdf) need = 1, cp = b & 0x1f;
    else if (b >= 0xe0 && b <= 0xef) need = 2, cp = b & 0x0f, lo = b == 0xe0 ? 0xa0 : 0x80, hi = b == 0xed ? 0x9f : 0xbf;
    else if (b >= 0xf0 && b <= 0xf4) need = 3, cp = b & 0x07, lo = b == 0xf0 ? 0x90 : 0x80, hi = b == 0xf4 ? 0x8f : 0xbf;
    else {
      out += U'\uFFFD';
      ++i;
      continue;
    }
    size_t j = i + 1;
    bool ok = true;
    for (int k = 0; k < need; ++k, ++j) {
      const unsigned char c = j < s.size() ? static_cast<unsigned char>(s[j]) : 0;
      if (j >= s.size() || c < lo || c > hi) {
        ok = false;
        break;
      }
      cp = (cp << 6) | (c & 0x3f);
      lo = 0x80, hi = 0xbf;
    }
    out += ok ? cp : U'\uFFFD';
    i = j;  // on an error, resume at the byte that broke the sequence
  }
  return out;
}

}  // namespace quintnet::text
