// Floats written as text (JSON configs, Hugging Face's config.json): a float widened to
// double prints its binary noise (0.1f -> 0.10000000149011612); decimal_of gives the double
// nearest the float's shortest decimal form (0.1), which reads back as the same float.
#pragma once

#include <charconv>
#include <cstdlib>
#include <string>

namespace lansbert {

inline double decimal_of(float f) {
  char buf[64];
  const auto r = std::to_chars(buf, buf + sizeof buf - 1, f);  // shortest round-trip form
  *r.ptr = '\0';
  return std::strtod(buf, nullptr);
}

}  // namespace lansbert
