#pragma once
// UTF-8 as the tokenizers need it: code points out, with the WHATWG decoder's handling
// of invalid bytes (each maximal invalid subsequence becomes one U+FFFD, as TextDecoder
// and Node's file reading do), and back; and a tokenizer file read whole.
#include <string>
#include <string_view>

namespace quintnet::text {

std::u32string decode_utf8(std::string_view s);
void append_utf8(std::string& out, char32_t cp);
// Throws core::UserError naming the file.
std::string read_tokenizer_file(const std::string& path);

}  // namespace quintnet::text
