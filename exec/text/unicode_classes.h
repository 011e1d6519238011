#pragma once
// The character classes of the pre-tokenizer patterns (GPT-2's, cl100k_base's), as
// JavaScript's regular expressions define them (the reference encoders are npm packages).
// The tables are generated (exec/text/unicode_tables.inc, by scripts/gen_unicode_classes.js).

namespace quintnet::text {

bool is_letter(char32_t cp);  // \p{L}
bool is_number(char32_t cp);  // \p{N}
bool is_space(char32_t cp);   // \s in a JavaScript /u pattern
inline bool is_other(char32_t cp) { return !is_space(cp) && !is_letter(cp) && !is_number(cp); }  // [^\s\p{L}\p{N}]

}  // namespace quintnet::text
