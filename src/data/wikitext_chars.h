// Character classes and small string helpers shared by the wikitext cleaner's files
// (wikitext.cc, wikitext_paragraphs.cc). Private to src/data.
#pragma once

#include <cstddef>
#include <string_view>

namespace lansbert::wikitext {

// ASCII only: bytes >= 0x80 are neither spaces nor letters here, and pass through as text.
inline constexpr auto is_blank = [](char c) { return c == ' ' || c == '\t' || c == '\r'; };
inline constexpr auto is_space = [](char c) { return is_blank(c) || c == '\n' || c == '\v' || c == '\f'; };
inline constexpr auto is_lower = [](char c) { return c >= 'a' && c <= 'z'; };
inline constexpr auto lower = [](char c) { return c >= 'A' && c <= 'Z' ? static_cast<char>(c + 32) : c; };
inline constexpr auto is_alnum = [](char c) { return is_lower(lower(c)) || (c >= '0' && c <= '9'); };

// Case-insensitive: does s continue at i with `lower_prefix` (given in lower case)?
inline bool starts_at(std::string_view s, size_t i, std::string_view lower_prefix) {
  if (i > s.size() || s.size() - i < lower_prefix.size()) return false;
  for (size_t k = 0; k < lower_prefix.size(); ++k) {
    if (lower(s[i + k]) != lower_prefix[k]) return false;
  }
  return true;
}

// Case-insensitive: does `lower_needle` (given in lower case) occur in s?
inline bool contains(std::string_view s, std::string_view lower_needle) {
  for (size_t i = 0; i + lower_needle.size() <= s.size(); ++i) {
    if (starts_at(s, i, lower_needle)) return true;
  }
  return false;
}

inline bool iequals(std::string_view a, std::string_view lower_b) {
  return a.size() == lower_b.size() && starts_at(a, 0, lower_b);
}

// Trimmed of blanks (a line's ends) ...
inline std::string_view trim(std::string_view s) {
  while (!s.empty() && is_blank(s.front())) s.remove_prefix(1);
  while (!s.empty() && is_blank(s.back())) s.remove_suffix(1);
  return s;
}

// ... or of every space, newlines too (a template's arguments are often one a line).
inline std::string_view trim_space(std::string_view s) {
  while (!s.empty() && is_space(s.front())) s.remove_prefix(1);
  while (!s.empty() && is_space(s.back())) s.remove_suffix(1);
  return s;
}

}  // namespace lansbert::wikitext
