#pragma once
// The character classes of GPT-2's pre-tokenizer pattern, as JavaScript's regular
// expressions define them (the reference encoder is the gpt-3-encoder npm package).
// The tables are generated (exec/text/unicode_tables.inc, by scripts/gen_unicode_classes.js).

namespace quintnet::text {

bool is_letter(char32_t cp);  // \p{L}
bool is_number(char32_t cp);  // \p{N}
bool is_space(char32_t cp);   // \s in a JavaScript /u pattern

}  // namespace quintnet::text
