#include "exec/text/unicode_classes.h"

#include <algorithm>
#include <iterator>

namespace quintnet::text {
namespace {

struct CodePointRange {
  char32_t first, last;
};

// kLetters, kNumbers, kSpaces: sorted, disjoint ranges (generated from Node).
#include "exec/text/unicode_tables.inc"

template <std::size_t N>
bool contains(const CodePointRange (&table)[N], char32_t cp) {
  const auto* it = std::upper_bound(std::begin(table), std::end(table), cp,
                                    [](char32_t c, const CodePointRange& r) { return c < r.first; });
  return it != std::begin(table) && cp <= std::prev(it)->last;
}

}  // namespace

bool is_letter(char32_t cp) { return cp < 0x80 ? ((cp | 0x20) >= 'a' && (cp | 0x20) <= 'z') : contains(kLetters, cp); }
bool is_number(char32_t cp) { return cp < 0x80 ? (cp >= '0' && cp <= '9') : contains(kNumbers, cp); }
bool is_space(char32_t cp) { return contains(kSpaces, cp); }

}  // namespace quintnet::text
