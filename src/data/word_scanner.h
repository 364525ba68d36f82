// WordScanner: BERT's basic tokenizer (Hugging Face BertNormalizer + BertPreTokenizer) as
// one pass over UTF-8 bytes that hands each word to a callback. ASCII bytes go through a
// 128-entry class table with no Unicode lookups; a run of non-ASCII code points is
// cleaned, CJK-spaced, NFD-decomposed, canonically reordered, accent-stripped and
// lower-cased as a unit (reordering needs the whole run), then split like ASCII.
// The word buffer is reused, so a word costs no allocation once the buffer has grown.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "lansbert/core/status.h"
#include "utf8.h"

namespace lansbert {

class WordScanner {
 public:
  explicit WordScanner(bool lower_case) : lower_case_(lower_case) {}

  // Calls on_word(std::string_view word, int chars) for each word of `text` in order.
  // Invalid UTF-8 is an error naming the byte offset within `text`.
  template <class OnWord>
  Status scan(std::string_view text, OnWord&& on_word) const;

  // Character classes after normalisation.
  enum Class : uint8_t { kDrop = 0, kSpace = 1, kPunct = 2, kWord = 3 };
  static bool is_punctuation(int32_t cp);

 private:
  // Normalises the non-ASCII run starting at text[*i] into `out` (code points; spaces for
  // whitespace and around CJK ideographs) and advances *i past it. ASCII characters that
  // cleaning drops (controls) do not end a run: they are skipped inside it.
  Status normalize_run(const unsigned char* s, size_t n, size_t* i, std::vector<int32_t>* out,
                       std::vector<int32_t>* tmp) const;
  static const uint8_t kAscii[128];
  bool lower_case_;
};

template <class OnWord>
Status WordScanner::scan(std::string_view text, OnWord&& on_word) const {
  const auto* s = reinterpret_cast<const unsigned char*>(text.data());
  const size_t n = text.size();
  std::string word;
  word.reserve(64);
  int chars = 0;
  std::vector<int32_t> run, tmp;
  auto flush = [&] {
    if (!word.empty()) {
      on_word(std::string_view(word), chars);
      word.clear();
      chars = 0;
    }
  };
  auto ascii = [&](unsigned char b) {
    switch (kAscii[b]) {
      case kDrop:
        break;
      case kSpace:
        flush();
        break;
      case kPunct: {
        flush();
        const char c = static_cast<char>(b);
        on_word(std::string_view(&c, 1), 1);
        break;
      }
      default:
        word.push_back(static_cast<char>(lower_case_ && b >= 'A' && b <= 'Z' ? b + 32 : b));
        ++chars;
    }
  };
  size_t i = 0;
  while (i < n) {
    if (s[i] < 0x80) {
      ascii(s[i++]);
      continue;
    }
    LB_RETURN_IF_ERROR(normalize_run(s, n, &i, &run, &tmp));
    for (int32_t cp : run) {
      if (cp < 0x80) {
        ascii(static_cast<unsigned char>(cp));
        continue;
      }
      char buf[4];
      const int len = utf8::encode(cp, buf);
      if (is_punctuation(cp)) {
        flush();
        on_word(std::string_view(buf, len), 1);
      } else {
        word.append(buf, len);
        ++chars;
      }
    }
  }
  flush();
  return Status::ok();
}

}  // namespace lansbert
