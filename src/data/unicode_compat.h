// Exceptions to libutf8proc's categories that make the tokenizer agree with Hugging Face
// tokenizers, whose punctuation, mark and control tables come from an older Unicode
// version than libutf8proc's. The tables are generated (scripts/gen-unicode-compat.py).
#pragma once

#include <cstdint>

namespace lansbert::unicode_compat {

struct Range {
  int32_t lo, hi;
};

extern const Range kNotDropped[];    // Cc/Cf/Co here, but tokenizers keeps them
extern const Range kExtraDropped[];  // tokenizers drops them, category says keep
extern const Range kNotPunct[];      // P* here, not punctuation to tokenizers
extern const Range kExtraPunct[];    // punctuation to tokenizers only
extern const Range kNotMark[];       // Mn here, kept by tokenizers' accent stripping
extern const Range kExtraMark[];     // stripped by tokenizers only
extern const int kNotDroppedCount, kExtraDroppedCount, kNotPunctCount, kExtraPunctCount,
    kNotMarkCount, kExtraMarkCount;

// True iff cp lies in one of the sorted, disjoint `ranges`.
inline bool contains(const Range* ranges, int count, int32_t cp) {
  int lo = 0, hi = count;
  while (lo < hi) {
    const int mid = (lo + hi) / 2;
    if (ranges[mid].hi < cp) {
      lo = mid + 1;
    } else {
      hi = mid;
    }
  }
  return lo < count && ranges[lo].lo <= cp;
}

}  // namespace lansbert::unicode_compat
