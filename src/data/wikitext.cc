// Wikitext -> prose (see wikitext.h). Pass 1 works as MediaWiki's preprocessor does (comments
// and extension tags go before any braces are matched, so "}}" inside <math> cannot close a
// template); pass 2 reads the lines and the inline markup; pass 3 finishes each paragraph.
#include "wikitext.h"

#include <algorithm>
#include <array>
#include <charconv>
#include <cstdint>
#include <cstring>
#include <memory>
#include <vector>

namespace lansbert {
namespace {

constexpr size_t kNone = static_cast<size_t>(-1);
// Pass 1 puts this byte where a removed tag began a line, so that "<ref>x</ref>* y" stays a
// line of prose (lines are judged as written). A real 0x7f byte goes on as "&#127;".
constexpr char kMark = '\x7f';
constexpr int kMaxDepth = 32;  // link labels nested deeper than this are hostile: dropped

// ASCII only: bytes >= 0x80 are neither spaces nor letters here, and pass through as text.
constexpr auto is_blank = [](char c) { return c == ' ' || c == '\t' || c == '\r'; };
constexpr auto is_space = [](char c) { return is_blank(c) || c == '\n' || c == '\v' || c == '\f'; };
constexpr auto is_lower = [](char c) { return c >= 'a' && c <= 'z'; };
constexpr auto lower = [](char c) { return c >= 'A' && c <= 'Z' ? static_cast<char>(c + 32) : c; };
constexpr auto is_alnum = [](char c) { return is_lower(lower(c)) || (c >= '0' && c <= '9'); };

// Case-insensitive: does s continue at i with `lower_prefix` (given in lower case)?
bool starts_at(std::string_view s, size_t i, std::string_view lower_prefix) {
  if (i > s.size() || s.size() - i < lower_prefix.size()) return false;
  for (size_t k = 0; k < lower_prefix.size(); ++k) {
    if (lower(s[i + k]) != lower_prefix[k]) return false;
  }
  return true;
}

bool iequals(std::string_view a, std::string_view lower_b) {
  return a.size() == lower_b.size() && starts_at(a, 0, lower_b);
}

std::string_view trim(std::string_view s) {
  while (!s.empty() && is_blank(s.front())) s.remove_prefix(1);
  while (!s.empty() && is_blank(s.back())) s.remove_suffix(1);
  return s;
}

// ---- Pass 1: comments, extension elements, nowiki, HTML tags -------------------------------

// Elements dropped with their content; nowiki (last) keeps its content, escaped.
constexpr std::string_view kElements[] = {
    "ref",      "references",      "math",     "chem",         "ce",       "code",
    "pre",      "syntaxhighlight", "source",   "score",        "timeline", "gallery",
    "imagemap", "graph",           "mapframe", "templatedata", "hiero",    "inputbox",
    "table",    "includeonly",     "nowiki"};
constexpr int kElementCount = static_cast<int>(std::size(kElements));
constexpr int kNowiki = kElementCount - 1;

class Pass1 {
 public:
  explicit Pass1(std::string_view s) : s_(s), n_(s.size()) {}
  std::string run() {
    out_.reserve(n_ + n_ / 16);
    for (size_t i = 0; i < n_;) {
      size_t j = i;
      while (j < n_ && s_[j] != '<' && s_[j] != kMark) ++j;
      out_.append(s_.data() + i, j - i);
      i = j < n_ ? step(j) : n_;
    }
    return std::move(out_);
  }

 private:
  struct Tag {
    std::string_view name;
    size_t end = 0;  // just past '>'
    bool closing = false, self_closing = false;
  };

  // s_[i] is '<' or kMark; handles what starts there, returns where to go on.
  size_t step(size_t i) {
    if (s_[i] == kMark) return out_ += "&#127;", i + 1;
    if (s_.compare(i, 4, "<!--") == 0) return comment(i);
    Tag t;
    if (!parse_tag(i, &t)) return out_ += '<', i + 1;  // "a < b", "<3": text
    if (iequals(t.name, "br")) return out_ += ' ', t.end;
    if (out_.empty() || out_.back() == '\n') out_ += kMark;
    int k = 0;
    while (k < kElementCount && !iequals(t.name, kElements[k])) ++k;
    if (t.closing || t.self_closing || k == kElementCount) return t.end;  // content stays
    size_t close_end = 0;
    const size_t c = find_close(k, t.end, &close_end);
    if (c == kNone) return t.end;  // never closed: only the opening tag goes
    if (k == kNowiki) escape(t.end, c);
    return close_end;
  }

  // MediaWiki drops a comment that fills a line together with its newline, so that it does
  // not split the paragraph around it. Unterminated, it runs to the end.
  size_t comment(size_t i) {
    const size_t e = s_.find("-->", i + 4);
    if (e == std::string_view::npos) return n_;
    const bool whole_line = out_.empty() || out_.back() == '\n';
    return e + 3 + (whole_line && e + 3 < n_ && s_[e + 3] == '\n');
  }

  // "<name ...>", "</name>", "<name/>": name is an ASCII letter, then letters and digits.
  bool parse_tag(size_t i, Tag* t) {
    size_t p = i + 1;
    t->closing = p < n_ && s_[p] == '/';
    p += t->closing;
    const size_t name = p;
    if (p >= n_ || !is_lower(lower(s_[p]))) return false;
    while (p < n_ && is_alnum(s_[p])) ++p;
    if (p >= n_ || !(is_space(s_[p]) || s_[p] == '/' || s_[p] == '>')) return false;
    // Attributes run to the '>'; a '<' first means no tag. (Stopping there also keeps
    // "<a<a<a..." linear: the next search starts at that '<'.)
    size_t g = p;
    while (g < n_ && s_[g] != '>' && s_[g] != '<') ++g;
    if (g >= n_ || s_[g] == '<') return false;
    t->name = s_.substr(name, p - name);
    t->self_closing = s_[g - 1] == '/';
    t->end = g + 1;
    return true;
  }

  // "</name >" of element k at or after p: its '<' (kNone if none), and *end just past it.
  // The last answer holds for any later p up to it: a thousand unclosed <ref>s cost one search.
  size_t find_close(int k, size_t p, size_t* end) {
    Close& c = close_[k];
    if (c.from == kNone || p < c.from || (c.at != kNone && p > c.at)) {
      c.from = p;
      c.at = kNone;
      for (size_t q = s_.find("</", p); q != std::string_view::npos; q = s_.find("</", q + 2)) {
        size_t r = q + 2 + kElements[k].size();
        if (!starts_at(s_, q + 2, kElements[k])) continue;
        while (r < n_ && is_space(s_[r])) ++r;
        if (r < n_ && s_[r] == '>') {
          c.at = q, c.end = r + 1;
          break;
        }
      }
    }
    *end = c.end;
    return c.at;
  }

  // nowiki content must stay text: its markup characters become character references,
  // which pass 3 decodes after all markup has been read. '&' stays: MediaWiki decodes
  // references inside nowiki too.
  void escape(size_t a, size_t b) {
    for (size_t i = a; i < b; ++i) {
      const char c = s_[i];
      const bool markup = c != '\0' && std::strchr("<>[]{}|'=*#;:_\x7f", c) != nullptr;
      out_ +=
          markup ? "&#" + std::to_string(static_cast<unsigned char>(c)) + ';' : std::string(1, c);
    }
  }

  struct Close {
    size_t from = kNone, at = kNone, end = 0;
  };
  std::string_view s_;
  size_t n_;
  std::string out_;
  Close close_[kElementCount];
};

// ---- Pass 2: lines, templates, tables, links ------------------------------------------------

constexpr std::string_view kDroppedSections[] = {
    "references",      "notes",          "footnotes",      "citations",
    "sources",         "bibliography",   "works cited",    "notes and references",
    "further reading", "external links", "see also",       "gallery",
    "discography",     "filmography",    "selected works", "publications"};

constexpr std::string_view kUrlSchemes[] = {"http://", "https://", "ftp://", "//",
                                            "mailto:", "news:",    "irc://"};

// Bytes that may start inline markup; runs of other bytes are copied as they are.
constexpr std::array<bool, 256> kSpecial = [] {
  std::array<bool, 256> t{};
  for (char c : std::string_view("\n\x7f{['_hH")) t[static_cast<unsigned char>(c)] = true;
  return t;
}();

// Interlanguage prefix: 2-3 lower-case letters, optionally "-" and more ("zh-min-nan").
bool is_language(std::string_view p) {
  size_t k = 0;
  while (k < p.size() && is_lower(p[k])) ++k;
  if (k < 2 || k > 3) return false;
  if (k == p.size()) return true;
  if (p[k] != '-' || p.back() == '-') return false;
  return std::all_of(p.begin() + k, p.end(), [](char c) { return is_lower(c) || c == '-'; });
}

class Pass2 {
 public:
  explicit Pass2(std::string_view s) : s_(s), n_(s.size()) {}
  std::string run() {
    match_pairs();
    out_.reserve(n_);
    for (size_t i = 0; i < n_;) i = line(i);
    return std::move(out_);
  }

 private:
  size_t eol(size_t i) const { return std::min(s_.find('\n', i), n_); }
  size_t next(size_t e) const { return e < n_ ? e + 1 : n_; }
  void put(std::string_view t) {
    if (emit_) out_.append(t);
  }

  // match_[open] = its closing '}' / ']' (kNone if unmatched), by one pass with stacks.
  void match_pairs() {
    match_ = std::make_unique_for_overwrite<size_t[]>(n_);
    std::vector<size_t> braces, brackets;
    for (size_t i = 0; i < n_; ++i) {
      const char c = s_[i];
      if (c == '{' || c == '[') {
        match_[i] = kNone;
        (c == '{' ? braces : brackets).push_back(i);
      } else if (c == '}' || c == ']') {
        std::vector<size_t>& open = c == '}' ? braces : brackets;
        if (!open.empty()) match_[open.back()] = i, open.pop_back();
      }
    }
  }

  // One line, judged by its first characters as written; returns the next line's start.
  // Dropped lines are still read through, as a template in them may span lines; an empty
  // line in out_ ends the paragraph.
  size_t line(size_t i) {
    const size_t e = eol(i);
    const std::string_view raw = s_.substr(i, e - i);
    if (!raw.empty() && raw[0] == '=' && trim(raw).back() == '=') return heading(raw), next(e);
    if (skip_level_ > 0) return next(e);
    size_t t = i;
    while (t < e && (is_blank(s_[t]) || s_[t] == ':' || s_[t] == kMark)) ++t;
    if (e - t >= 2 && s_[t] == '{' && s_[t + 1] == '|') return out_ += '\n', table(e);
    const char c = raw.empty() ? '\n' : raw[0];
    const bool drop = c == '*' || c == '#' || c == ';' || raw.starts_with("----");
    if (c == ':') {  // an indented block: a paragraph of its own, without the colons
      while (i < e && s_[i] == ':') ++i;
      out_ += '\n';
    }
    emit_ = !drop;
    const size_t end = inline_span(i, n_, 0);
    emit_ = true;
    out_ += c == ':' ? "\n\n" : "\n";
    return next(end);
  }

  // A heading line; a section of references or links is skipped up to the next heading of
  // the same or a higher level.
  void heading(std::string_view raw) {
    raw = trim(raw);
    size_t lead = 0, trail = 0;
    while (lead < raw.size() && raw[lead] == '=') ++lead;
    while (trail < raw.size() && raw[raw.size() - 1 - trail] == '=') ++trail;
    const int level = static_cast<int>(std::min<size_t>(std::min(lead, trail), 6));
    out_ += '\n';
    if (skip_level_ > 0 && level > skip_level_) return;
    const std::string_view title =
        lead == raw.size() ? "" : trim(raw.substr(lead, raw.size() - lead - trail));
    skip_level_ = 0;
    for (std::string_view d : kDroppedSections) {
      if (iequals(title, d)) skip_level_ = level;
    }
  }

  // Skips a table whose "{|" line ends at e, to its matching "|}" line (or the end).
  size_t table(size_t e) {
    for (int depth = 1; e < n_;) {
      size_t t = e + 1;
      e = eol(t);
      while (t < e && (is_blank(s_[t]) || s_[t] == ':' || s_[t] == kMark)) ++t;
      if (e - t < 2) continue;
      if (s_[t] == '{' && s_[t + 1] == '|') ++depth;
      if (s_[t] == '|' && s_[t + 1] == '}' && --depth == 0) return next(e);
    }
    return n_;
  }

  // Inline markup in [i, end); at depth 0 stops at a newline and returns its position.
  size_t inline_span(size_t i, size_t end, int depth) {
    while (i < end) {
      size_t j = i;
      while (j < end && !kSpecial[static_cast<unsigned char>(s_[j])]) ++j;
      put(s_.substr(i, j - i));
      if (j >= end) break;
      const char c = s_[j];
      if (c == '\n' && depth == 0) return j;
      if (c == '\n') put(" ");  // a label running over lines
      i = c == '\n' || c == kMark ? j + 1
          : c == '{'              ? brace(j, end)
          : c == '['              ? bracket(j, end, depth)
          : c == '\''             ? quotes(j, end)
          : c == '_'              ? behaviour_switch(j, end)
                                  : bare_url(j, end);
    }
    return end;
  }

  size_t brace(size_t i, size_t end) {
    if (i + 1 >= end || s_[i + 1] != '{') return put("{"), i + 1;
    if (match_[i] != kNone && match_[i] < end) return match_[i] + 1;  // a template: gone
    // Unmatched "{{": dropped. In "{{{x}}" the first brace is the stray one.
    const bool stray = i + 2 < end && s_[i + 2] == '{' && match_[i + 1] < end;
    return i + (stray ? 1 : 2);
  }

  size_t bracket(size_t i, size_t end, int depth) {
    if (i + 1 < end && s_[i + 1] == '[') return link(i, end, depth);
    bool url = false;
    for (std::string_view scheme : kUrlSchemes) url = url || starts_at(s_, i + 1, scheme);
    if (!url) return put("["), i + 1;  // "[sic]", "[1]": text
    // The label ends at ']' on the same line. Stopping at '[' too keeps "[http://a [http://a"
    // linear (the next search starts there) and costs only labels holding a '['.
    size_t c = i + 1;
    while (c < end && s_[c] != ']' && s_[c] != '[' && s_[c] != '\n') ++c;
    if (c >= end || s_[c] != ']') return i + 1;  // unclosed, but meant as a link: '[' goes
    size_t label = i + 1;
    while (label < c && !is_blank(s_[label])) ++label;
    if (depth < kMaxDepth) inline_span(label, c, depth + 1);  // [url] alone: nothing
    return c + 1;
  }

  size_t link(size_t i, size_t end, int depth) {
    const size_t c = match_[i];
    if (c >= end || match_[i + 1] != c - 1) return i + 2;  // a stray "[[": text stays
    const size_t b = c - 1;                                // the inner text is [i + 2, b)
    const size_t bar = std::min(s_.substr(0, b).find('|', i + 2), b);
    std::string_view target = trim(s_.substr(i + 2, bar - i - 2));
    const bool colon = !target.empty() && target[0] == ':';
    if (colon) target = trim(target.substr(1));
    const size_t ns_end = target.find(':');
    const std::string_view ns = ns_end == target.npos ? "" : trim(target.substr(0, ns_end));
    const bool gone = iequals(ns, "file") || iequals(ns, "image") || iequals(ns, "media") ||
                      iequals(ns, "category") || is_language(ns);
    if ((gone && !colon) || depth >= kMaxDepth) return c + 1;
    std::string_view shown = s_.substr(bar + 1, b - bar - 1);
    if (bar == b) {
      shown = target;
    } else if (trim(shown).empty()) {  // the pipe trick: "[[Help:Foo (bar)|]]" shows "Foo"
      shown = trim(ns_end == target.npos ? target : target.substr(ns_end + 1));
      const size_t open = shown.rfind('(');
      if (!shown.empty() && shown.back() == ')' && open != shown.npos) {
        shown = trim(shown.substr(0, open));
      }
    }
    const auto a = static_cast<size_t>(shown.data() - s_.data());
    inline_span(a, a + shown.size(), depth + 1);
    return c + 1;
  }

  // '' and ''' (and ''''' for both) only style the text; four leave one apostrophe, and
  // more than five leave the extra ones, as MediaWiki renders them.
  size_t quotes(size_t i, size_t end) {
    size_t r = i;
    while (r < end && s_[r] == '\'') ++r;
    if (r - i == 1 || r - i == 4) put("'");
    if (r - i > 5) put(s_.substr(i, r - i - 5));
    return r;
  }

  size_t behaviour_switch(size_t i, size_t end) {  // __TOC__, __NOTOC__, ...
    size_t p = i + 2;
    while (p < end && s_[p] >= 'A' && s_[p] <= 'Z') ++p;
    if (p > i + 2 && s_[i + 1] == '_' && p + 1 < end && s_[p] == '_' && s_[p + 1] == '_') {
      return p + 2;
    }
    return put("_"), i + 1;
  }

  size_t bare_url(size_t i, size_t end) {  // at 'h' or 'H'
    const std::string_view s = s_.substr(0, end);
    if (!starts_at(s, i, "http://") && !starts_at(s, i, "https://")) {
      return put(s.substr(i, 1)), i + 1;
    }
    while (i < end && !is_space(s_[i])) ++i;
    return i;
  }

  std::string_view s_;
  size_t n_;
  std::unique_ptr<size_t[]> match_;
  std::string out_;
  bool emit_ = true;
  int skip_level_ = 0;  // inside a dropped section: its heading's level
};

// ---- Pass 3: paragraphs ---------------------------------------------------------------------

// Pairs of name, text.
constexpr std::string_view kNamedReferences[] = {
    "nbsp",   " ",      "thinsp", " ",      "ensp",   " ",      "emsp",   " ",      "amp",
    "&",      "lt",     "<",      "gt",     ">",      "quot",   "\"",     "apos",   "'",
    "ndash",  "\u2013", "mdash",  "\u2014", "minus",  "\u2212", "times",  "\u00D7", "hellip",
    "\u2026", "lsquo",  "\u2018", "rsquo",  "\u2019", "ldquo",  "\u201C", "rdquo",  "\u201D",
    "deg",    "\u00B0", "middot", "\u00B7", "prime",  "\u2032", "Prime",  "\u2033"};

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
  const int extra = cp < 0x80 ? 0 : cp < 0x800 ? 1 : cp < 0x10000 ? 2 : 3;
  constexpr unsigned kLead[] = {0, 0xC0, 0xE0, 0xF0};
  *out += static_cast<char>(kLead[extra] | (cp >> (6 * extra)));
  for (int k = extra - 1; k >= 0; --k) *out += static_cast<char>(0x80 | ((cp >> (6 * k)) & 0x3F));
  return true;
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
    if (c == '(') {
      size_t j = i + 1;
      while (j < t.size() && (is_space(t[j]) || is_separator(t[j]))) ++j;
      if (j < t.size() && t[j] == ')') {  // "( ; )": leftovers only, all gone
        i = j;
        continue;
      }
      i = j - 1;  // separators just inside '(' go
    }
    if (pending && !space_goes(t, i)) *o += ' ';
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

// Pass 2's lines -> output: a blank line ends a paragraph, the lines of one are joined.
std::string paragraphs(std::string_view lines) {
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

}  // namespace

std::string wikitext_to_plain(std::string_view wikitext) {
  size_t i = 0;
  while (i < wikitext.size() && is_space(wikitext[i])) ++i;
  if (starts_at(wikitext, i, "#redirect")) return "";
  return paragraphs(Pass2(Pass1(wikitext).run()).run());
}

}  // namespace lansbert
