// WordScanner's Unicode rules, each as Hugging Face tokenizers (Rust) applies them, checked
// against it code point by code point (scripts/check-tokenizer-codepoints.py):
//  - clean: drop U+0000, U+FFFD and categories Cc Cf Co Cs except \t \n \r; unassigned
//    code points (Cn) are kept, as tokenizers keeps them; then every White_Space code point
//    (Rust char::is_whitespace) becomes a space. Dropping comes first, so U+000B, U+000C and
//    U+0085 (Cc and White_Space) are dropped, not spaced.
//  - CJK: spaces around the ideograph blocks tokenizers lists (is_chinese_char).
//  - uncased: NFD, drop Mn, lowercase (simple mapping; the one multi-character lowercase,
//    U+0130, cannot survive NFD).
//  - punctuation: ASCII punctuation and categories Pc Pd Ps Pe Pi Pf Po.
// tokenizers takes categories from an older Unicode version than libutf8proc, so each
// category test has generated exceptions (unicode_compat.h).
#include "word_scanner.h"

#include <utf8proc.h>

#include <string>

#include "canonical_order.h"
#include "unicode_compat.h"

namespace lansbert {

namespace {

bool is_white_space(int32_t cp) {
  switch (cp) {
    case 0x09:
    case 0x0A:
    case 0x0B:
    case 0x0C:
    case 0x0D:
    case 0x20:
    case 0x85:
    case 0xA0:
    case 0x1680:
    case 0x2028:
    case 0x2029:
    case 0x202F:
    case 0x205F:
    case 0x3000:
      return true;
    default:
      return cp >= 0x2000 && cp <= 0x200A;
  }
}

bool is_dropped(int32_t cp) {
  if (cp == 0 || cp == 0xFFFD) return true;
  if (cp == '\t' || cp == '\n' || cp == '\r') return false;
  namespace uc = unicode_compat;
  switch (utf8proc_category(cp)) {
    case UTF8PROC_CATEGORY_CC:
    case UTF8PROC_CATEGORY_CF:
    case UTF8PROC_CATEGORY_CO:
    case UTF8PROC_CATEGORY_CS:
      return !uc::contains(uc::kNotDropped, uc::kNotDroppedCount, cp);
    default:
      return uc::contains(uc::kExtraDropped, uc::kExtraDroppedCount, cp);
  }
}

bool is_stripped_mark(int32_t cp) {
  namespace uc = unicode_compat;
  if (utf8proc_category(cp) == UTF8PROC_CATEGORY_MN) {
    return !uc::contains(uc::kNotMark, uc::kNotMarkCount, cp);
  }
  return uc::contains(uc::kExtraMark, uc::kExtraMarkCount, cp);
}

bool is_cjk(int32_t cp) {
  return (cp >= 0x4E00 && cp <= 0x9FFF) || (cp >= 0x3400 && cp <= 0x4DBF) ||
         (cp >= 0x20000 && cp <= 0x2A6DF) || (cp >= 0x2A700 && cp <= 0x2B73F) ||
         (cp >= 0x2B740 && cp <= 0x2B81F) || (cp >= 0x2B920 && cp <= 0x2CEAF) ||
         (cp >= 0xF900 && cp <= 0xFAFF) || (cp >= 0x2F800 && cp <= 0x2FA1F);
}

int ccc(int32_t cp) {
  return utf8proc_get_property(cp)->combining_class;
}

}  // namespace

// Tab, newline and carriage return are whitespace; the other C0 controls and DEL are
// dropped (they are Cc), which includes \v and \f.
const uint8_t WordScanner::kAscii[128] = {
    0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 0, 0, 1, 0, 0,  // 0x00
    0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,  // 0x10
    1, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2,  // 0x20  !"#$%&'()*+,-./
    3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 2, 2, 2, 2, 2, 2,  // 0x30  0-9 :;<=>?
    2, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3,  // 0x40  @A-O
    3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 2, 2, 2, 2, 2,  // 0x50  P-Z [\]^_
    2, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3,  // 0x60  `a-o
    3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 2, 2, 2, 2, 0,  // 0x70  p-z {|}~ DEL
};

bool WordScanner::is_punctuation(int32_t cp) {
  if (cp < 0x80) return kAscii[cp] == kPunct;
  namespace uc = unicode_compat;
  const auto cat = utf8proc_category(cp);
  if (cat >= UTF8PROC_CATEGORY_PC && cat <= UTF8PROC_CATEGORY_PO) {
    return !uc::contains(uc::kNotPunct, uc::kNotPunctCount, cp);
  }
  return uc::contains(uc::kExtraPunct, uc::kExtraPunctCount, cp);
}

Status WordScanner::normalize_run(const unsigned char* s, size_t n, size_t* pos,
                                  std::vector<int32_t>* out, std::vector<int32_t>* tmp) const {
  size_t i = *pos;
  // Clean and CJK-space the run; uncased text collects into tmp for decomposition.
  std::vector<int32_t>* clean = lower_case_ ? tmp : out;
  clean->clear();
  // An ASCII control character that cleaning drops does not end the run: Hugging Face drops
  // it before NFD, so the marks on either side are put in canonical order together.
  while (i < n && (s[i] >= 0x80 || kAscii[s[i]] == kDrop)) {
    if (s[i] < 0x80) {
      ++i;
      continue;
    }
    int32_t cp;
    const char* why = nullptr;
    const int len = utf8::decode(s, n, i, &cp, &why);
    if (len == 0) {
      return Status::corrupt("invalid UTF-8 at byte offset " + std::to_string(i) + " (" + why +
                             ")");
    }
    i += len;
    if (is_dropped(cp)) continue;
    if (is_white_space(cp)) {
      clean->push_back(' ');
    } else if (is_cjk(cp)) {
      clean->push_back(' ');
      clean->push_back(cp);
      clean->push_back(' ');
    } else {
      clean->push_back(cp);
    }
  }
  *pos = i;
  if (!lower_case_) return Status::ok();

  // NFD: decompose each code point, then put each run of non-starters in canonical order.
  out->clear();
  for (int32_t cp : *clean) {
    if (cp < 0xC0) {  // nothing below U+00C0 decomposes canonically
      out->push_back(cp);
      continue;
    }
    utf8proc_int32_t buf[8];
    int last_boundclass = 0;
    const auto k = utf8proc_decompose_char(cp, buf, 8, UTF8PROC_DECOMPOSE, &last_boundclass);
    for (utf8proc_ssize_t j = 0; j < k && j < 8; ++j) out->push_back(buf[j]);
  }
  // Combining classes start at U+0300: below it, no lookup.
  canonical_order(out->data(), out->size(), [](int32_t cp) { return cp < 0x300 ? 0 : ccc(cp); });
  // Strip non-spacing marks and lowercase, in place.
  size_t w = 0;
  for (int32_t cp : *out) {
    if (cp >= 0x300 && is_stripped_mark(cp)) continue;
    (*out)[w++] = cp < 0x80 ? cp : utf8proc_tolower(cp);
  }
  out->resize(w);
  return Status::ok();
}

}  // namespace lansbert
