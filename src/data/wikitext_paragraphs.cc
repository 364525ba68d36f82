// Pass 3 of wikitext_to_plain (wikitext.h): pass 2's lines -> paragraphs. Character
// references are decoded only here, after all markup has been read, so "&lt;ref&gt;" stays
// text; then spaces are collapsed and what removed markup left behind is tidied.
#include "wikitext_paragraphs.h"

#include <algorithm>
#include <charconv>
#include <cstdint>
#include <string>

#include "wikitext_chars.h"

namespace lansbert {
namespace {

using namespace wikitext;

// Pairs of name, text.
constexpr std::string_view kNamedReferences[] = {
    "nbsp",   " ",      "thinsp", " ",      "ensp",   " ",      "emsp",   " ",      "amp",
    "&",      "lt",     "<",      "gt",     ">",      "quot",   "\"",     "apos",   "'",
    "ndash",  "\u2013", "mdash",  "\u2014", "minus",  "\u2212", "times",  "\u00D7", "hellip",
    "\u2026", "lsquo",  "\u2018", "rsquo",  "\u2019", "ldquo",  "\u201C", "rdquo",  "\u201D",
    "deg",    "\u00B0", "middot", "\u00B7", "prime",  "\u2032", "Prime",  "\u2033", "shy",
    "",       "lrm",    "",       "rlm",    "",       "zwj",    "",       "zwnj",   "",
    "frac12", "\u00BD", "frac14", "\u00BC", "frac34", "\u00BE", "plusmn", "\u00B1", "le",
    "\u2264", "ge",     "\u2265", "ne",     "\u2260", "asymp",  "\u2248", "rarr",   "\u2192",
    "larr",   "\u2190", "harr",   "\u2194", "laquo",  "\u00AB", "raquo",  "\u00BB", "bull",
    "\u2022", "dagger", "\u2020", "sect",   "\u00A7", "copy",   "\u00A9", "reg",    "\u00AE",
    "trade",  "\u2122", "euro",   "\u20AC", "pound",  "\u00A3", "yen",    "\u00A5", "cent",
    "\u00A2", "micro",  "\u00B5", "sup2",   "\u00B2", "sup3",   "\u00B3", "divide", "\u00F7",
    "infin",  "\u221E", "fnof",   "\u0192", "sbquo",  "\u201A", "bdquo",  "\u201E"};

// REQUIRES: cp is a Unicode scalar value (not a surrogate, at most U+10FFFF).
void append_utf8(uint32_t cp, std::string* out) {
  const int extra = cp < 0x80 ? 0 : cp < 0x800 ? 1 : cp < 0x10000 ? 2 : 3;
  constexpr unsigned kLead[] = {0, 0xC0, 0xE0, 0xF0};
  *out += static_cast<char>(kLead[extra] | (cp >> (6 * extra)));
  for (int k = extra - 1; k >= 0; --k) *out += static_cast<char>(0x80 | ((cp >> (6 * k)) & 0x3F));
}

// "#NNN" or "#xHH" -> UTF-8 in *out; false for bad digits, 0, surrogates, past U+10FFFF.
bool numeric_reference(std::string_view body, std::string* out) {
  const bool hex = body.size() > 1 && lower(body[1]) == 'x';
  const std::string_view digits = body.substr(hex ? 2 : 1);
  uint32_t cp = 0;
  const auto [end, error] =
      std::from_chars(digits.data(), digits.data() + digits.size(), cp, hex ? 16 : 10);
  if (digits.empty() || error != std::errc() || end != digits.data() + digits.size() || cp == 0 ||
      cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) {
    return false;
  }
  append_utf8(cp, out);
  return true;
}

// &alpha; .. &omega; and &Alpha; .. &Omega;: the Greek letters, in alphabet order from U+03B1
// (lower) and U+0391 (upper); sigmaf, the final sigma, sits before sigma.
bool greek_reference(std::string_view body, std::string* out) {
  static constexpr std::string_view kNames[] = {
      "alpha", "beta", "gamma", "delta", "epsilon", "zeta", "eta", "theta", "iota", "kappa", "lambda", "mu",
      "nu",    "xi",   "omicron", "pi",  "rho",     "sigma", "tau", "upsilon", "phi", "chi", "psi", "omega"};
  if (body == "sigmaf") return append_utf8(0x3C2, out), true;
  if (body.empty()) return false;
  const bool upper = body[0] >= 'A' && body[0] <= 'Z';
  for (size_t k = 0; k < std::size(kNames); ++k) {
    if (body.size() != kNames[k].size() || lower(body[0]) != kNames[k][0] ||
        body.substr(1) != kNames[k].substr(1))
      continue;
    const uint32_t cp = (upper ? 0x391 : 0x3B1) + uint32_t(k) + (k >= 17 ? 1 : 0);
    return append_utf8(cp, out), true;
  }
  return false;
}

void decode_references(std::string_view t, std::string* out) {
  out->clear();
  for (size_t i = 0; i < t.size();) {
    const size_t amp = std::min(t.find('&', i), t.size());
    out->append(t.substr(i, amp - i));
    if (amp == t.size()) break;
    const size_t semi = t.substr(0, amp + 12).find(';', amp);  // names are short
    const std::string_view body = t.substr(amp + 1, semi - amp - 1);
    bool done = semi != t.npos && !body.empty() && body[0] == '#' && numeric_reference(body, out);
    for (size_t k = 0; k < std::size(kNamedReferences) && semi != t.npos && !done; k += 2) {
      if (body == kNamedReferences[k]) out->append(kNamedReferences[k + 1]), done = true;
    }
    done = done || (semi != t.npos && greek_reference(body, out));
    if (!done) *out += '&';
    i = done ? semi + 1 : amp + 1;
  }
}

constexpr auto is_separator = [](char c) { return c == ',' || c == ';' || c == ':'; };

// Does a space before t[i] go? Always before ',' and ')'; before ". ; : ! ?" unless a word
// follows at once (".NET" and "a :b" are left alone).
bool space_goes(std::string_view t, size_t i) {
  if (t[i] == ',' || t[i] == ')') return true;
  if (std::string_view(".;:!?").find(t[i]) == std::string_view::npos) return false;
  return i + 1 == t.size() || !(is_alnum(t[i + 1]) || static_cast<unsigned char>(t[i + 1]) >= 0x80);
}

// Collapses spaces, trims, and tidies what removed markup leaves behind: "( ; )" goes, and
// so does a space before punctuation, and separators and spaces just inside "(" or ")".
void tidy(std::string_view t, std::string* o) {
  o->clear();
  bool pending = false;  // a space to write before the next character
  int open = 0;
  for (size_t i = 0; i < t.size(); ++i) {
    const char c = t[i];
    if (is_space(c)) {
      pending = !o->empty();
      continue;
    }
    const bool space = pending && !space_goes(t, i);  // judged at c, before any skip below
    if (c == '(') {
      size_t j = i + 1;
      while (j < t.size() && (is_space(t[j]) || is_separator(t[j]))) ++j;
      // "( ; )" after a space: leftovers only, all gone ("main()" is code, and stays).
      if (j < t.size() && t[j] == ')' && (pending || o->empty() || !is_alnum(o->back()))) {
        i = j;
        continue;
      }
      i = j - 1;  // separators just inside '(' go
    }
    if (space) *o += ' ';
    pending = false;
    if (c == ')' && open > 0) {
      while (!o->empty() && (o->back() == ' ' || is_separator(o->back()))) o->pop_back();
      --open;
    }
    open += c == '(';
    *o += c;
  }
}

// Any ASCII letter or digit, or a character from U+00C0 on outside U+2000-U+2FFF
// (punctuation, symbols, arrows): a line of dashes and bullets is no prose.
bool has_word(std::string_view t) {
  return std::any_of(t.begin(), t.end(), [](char ch) {
    const auto c = static_cast<unsigned char>(ch);
    return is_alnum(ch) || (c >= 0xC3 && c < 0xF5 && c != 0xE2);
  });
}

}  // namespace

std::string wikitext_paragraphs(std::string_view lines) {
  std::string result, para, decoded, tidied;
  const auto flush = [&] {
    decode_references(para, &decoded);
    tidy(decoded, &tidied);
    if (has_word(tidied)) result.append(result.empty() ? "" : "\n").append(tidied);
    para.clear();
  };
  for (size_t i = 0; i < lines.size();) {
    const size_t e = std::min(lines.find('\n', i), lines.size());
    const std::string_view line = trim(lines.substr(i, e - i));
    if (line.empty()) flush();
    if (!line.empty()) para.append(para.empty() ? "" : " ").append(line);
    i = e + 1;
  }
  flush();
  return result;
}

}  // namespace lansbert
