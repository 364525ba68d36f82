// Strict UTF-8 decoding and encoding for the tokenizer. Decoding rejects what RFC 3629
// forbids (overlong forms, surrogates, code points above U+10FFFF, stray or missing
// continuation bytes) and says why, so the CLI can name the exact byte that is wrong.
#pragma once

#include <cstddef>
#include <cstdint>

namespace lansbert::utf8 {

// Decodes the sequence starting at s[i] (s[i] >= 0x80), REQUIRES i < n. On success sets
// *cp and returns its length (2..4); on failure returns 0 and sets *why.
inline int decode(const unsigned char* s, size_t n, size_t i, int32_t* cp, const char** why) {
  const unsigned char b = s[i];
  int len;
  int32_t v;
  unsigned char lo = 0x80, hi = 0xBF;  // allowed range of the second byte
  if (b < 0xC2) {
    *why = b < 0xC0 ? "unexpected continuation byte" : "overlong encoding";
    return 0;
  } else if (b < 0xE0) {
    len = 2, v = b & 0x1F;
  } else if (b < 0xF0) {
    len = 3, v = b & 0x0F;
    if (b == 0xE0) lo = 0xA0;
    if (b == 0xED) hi = 0x9F;
  } else if (b < 0xF5) {
    len = 4, v = b & 0x07;
    if (b == 0xF0) lo = 0x90;
    if (b == 0xF4) hi = 0x8F;
  } else {
    *why = "byte never valid in UTF-8";
    return 0;
  }
  if (i + 1 >= n || (s[i + 1] & 0xC0) != 0x80) {
    *why = "truncated sequence";
    return 0;
  }
  if (s[i + 1] < lo || s[i + 1] > hi) {
    *why = b == 0xED   ? "surrogate code point"
           : b == 0xF4 ? "code point above U+10FFFF"
                       : "overlong encoding";
    return 0;
  }
  v = (v << 6) | (s[i + 1] & 0x3F);
  for (int k = 2; k < len; ++k) {
    if (i + k >= n || (s[i + k] & 0xC0) != 0x80) {
      *why = "truncated sequence";
      return 0;
    }
    v = (v << 6) | (s[i + k] & 0x3F);
  }
  *cp = v;
  return len;
}

// Writes cp (a valid scalar value) to out; returns the number of bytes (1..4).
inline int encode(int32_t cp, char* out) {
  if (cp < 0x80) {
    out[0] = static_cast<char>(cp);
    return 1;
  }
  if (cp < 0x800) {
    out[0] = static_cast<char>(0xC0 | (cp >> 6));
    out[1] = static_cast<char>(0x80 | (cp & 0x3F));
    return 2;
  }
  if (cp < 0x10000) {
    out[0] = static_cast<char>(0xE0 | (cp >> 12));
    out[1] = static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out[2] = static_cast<char>(0x80 | (cp & 0x3F));
    return 3;
  }
  out[0] = static_cast<char>(0xF0 | (cp >> 18));
  out[1] = static_cast<char>(0x80 | ((cp >> 12) & 0x3F));
  out[2] = static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
  out[3] = static_cast<char>(0x80 | (cp & 0x3F));
  return 4;
}

}  // namespace lansbert::utf8
