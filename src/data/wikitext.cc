// Wikitext -> prose (see wikitext.h). Pass 1 works as MediaWiki's preprocessor does (comments
// and extension tags go before any braces are matched, so "}}" inside <math> cannot close a
// template); pass 2 reads the lines and the inline markup; pass 3 finishes each paragraph.
#include "wikitext.h"

#include "wikitext_chars.h"
#include "wikitext_paragraphs.h"
#include "wikitext_templates.h"

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

using namespace wikitext;

// ---- Pass 1: comments, extension elements, nowiki, HTML tags -------------------------------

// Elements dropped with their content; nowiki (last) keeps its content, escaped.
constexpr std::string_view kElements[] = {
    "ref",      "references",      "math",     "chem",         "ce",
    "pre",      "syntaxhighlight", "source",   "score",        "timeline", "gallery",
    "imagemap", "graph",           "mapframe", "templatedata", "hiero",    "inputbox",
    "table",    "includeonly",     "nowiki"};
constexpr int kElementCount = static_cast<int>(std::size(kElements));
constexpr int kNowiki = kElementCount - 1;

// What MediaWiki takes for a tag: the elements above, the other extension tags, and the HTML
// it allows in wikitext. Any other "<name ...>" is shown as text, and so is kept here.
bool is_known_tag(std::string_view name) {
  static constexpr std::string_view kOther[] = {
      "b",    "i",       "u",     "s",      "del",    "ins",    "sub",        "sup",         "small",
      "big",  "span",    "div",   "br",     "p",      "hr",     "li",         "ol",          "ul",
      "dl",   "dt",      "dd",    "tr",     "td",     "th",     "caption",    "font",        "center",
      "blockquote",      "cite",  "em",     "strong", "var",    "kbd",        "samp",        "abbr",
      "q",    "tt",      "h1",    "h2",     "h3",     "h4",     "h5",         "h6",          "ruby",
      "rb",   "rt",      "rp",    "rtc",    "bdi",    "bdo",    "data",       "time",        "mark",
      "wbr",  "strike",  "dfn",   "code",   "poem",   "section", "onlyinclude", "noinclude", "templatestyles",
      "categorytree",    "indicator", "langconvert", "phonos", "charinsert", "maplink", "thead", "tbody", "tfoot"};
  for (std::string_view k : kElements)
    if (iequals(name, k)) return true;
  for (std::string_view k : kOther)
    if (iequals(name, k)) return true;
  return false;
}

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
    if (!parse_tag(i, &t) || !is_known_tag(t.name)) return out_ += '<', i + 1;  // "a < b", "<3", "<y": text
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
    // Attributes run to the '>'; a '<' or a newline first means no tag (a "<x" in prose must
    // not swallow the paragraphs up to some later '>'). Stopping at '<' also keeps
    // "<a<a<a..." linear: the next search starts at that '<'.
    size_t g = p;
    while (g < n_ && s_[g] != '>' && s_[g] != '<' && s_[g] != '\n') ++g;
    if (g >= n_ || s_[g] != '>') return false;
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
    const size_t colons = std::min(raw.find_first_not_of(':'), raw.size());
    const char after = colons < raw.size() ? raw[colons] : '\n';  // ":* item" is a list too
    const bool drop = c == '*' || c == '#' || c == ';' || raw.starts_with("----") ||
                      (c == ':' && (after == '*' || after == '#' || after == ';')) || bold_heading(raw);
    if (c == ':') {  // an indented block: a paragraph of its own, without the colons
      while (i < e && s_[i] == ':') ++i;
      out_ += '\n';
    }
    emit_ = !drop;
    apostrophe_at_ = odd_bold_apostrophe(i, e);
    const size_t end = inline_span(i, n_, 0);
    emit_ = true;
    out_ += c == ':' ? "\n\n" : "\n";
    return next(end);
  }

  // A line that is all bold ("'''Early life'''") heads what follows, most often a list, as a
  // heading would: no prose.
  static bool bold_heading(std::string_view raw) {
    const std::string_view t = trim(raw);
    return t.size() > 6 && t.starts_with("'''") && t.ends_with("'''") &&
           t.substr(3, t.size() - 6).find("'''") == std::string_view::npos;
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
          : c == '{'              ? brace(j, end, depth)
          : c == '['              ? bracket(j, end, depth)
          : c == '\''             ? quotes(j, end)
          : c == '_'              ? behaviour_switch(j, end)
                                  : bare_url(j, end);
    }
    return end;
  }

  size_t brace(size_t i, size_t end, int depth) {
    if (i + 1 >= end || s_[i + 1] != '{') return put("{"), i + 1;
    if (match_[i] != kNone && match_[i] < end) {  // a template: gone, unless it shows prose
      const size_t c = match_[i];
      if (match_[i + 1] == c - 1 && depth < kMaxDepth) show_template(i + 2, c - 1, depth);
      return c + 1;
    }
    // Unmatched "{{": dropped. In "{{{x}}" the first brace is the stray one.
    const bool stray = i + 2 < end && s_[i + 2] == '{' && match_[i + 1] < end;
    return i + (stray ? 1 : 2);
  }

  // The template whose inner text is [a, b): its name and arguments are split at the '|'s
  // outside nested templates and links; wikitext_templates.h says what it shows, if anything.
  void show_template(size_t a, size_t b, int depth) {
    std::string_view name;
    TemplateArgs args;
    bool first = true;
    size_t unnamed = 0;
    for (size_t p = a, start = a;; ++p) {
      const bool nested = p < b && (s_[p] == '{' || s_[p] == '[') && match_[p] != kNone && match_[p] < b;
      if (nested) p = match_[p];
      if (p < b && s_[p] != '|') continue;
      const std::string_view part = s_.substr(start, p - start);
      if (first) {
        name = part, first = false;
      } else {
        const size_t eq = part.find('=');
        const bool is_named = eq != part.npos && part.substr(0, eq).find_first_of("{[") == part.npos;
        const std::string_view key = is_named ? trim_space(part.substr(0, eq)) : "";
        const std::string_view value = trim_space(is_named ? part.substr(eq + 1) : part);
        size_t number = 0;  // "2=E=mc2" is the second positional argument
        const bool numbered = !key.empty() && key.size() < 4 &&
                              std::all_of(key.begin(), key.end(), [](char ch) { return ch >= '0' && ch <= '9'; }) &&
                              (number = std::stoul(std::string(key))) > 0;
        // As MediaWiki: "|a|" is argument 1, 2, ... by its place among the unnamed ones, "|2=b|"
        // argument 2 wherever it stands, and of two values for one number the later wins.
        const size_t k = numbered ? number : (is_named ? 0 : ++unnamed);
        if (k > 0 && args.positional.size() < k) args.positional.resize(k);
        if (k > 0) args.positional[k - 1] = value;
        if (is_named && !numbered) args.named.emplace_back(key, value);
      }
      if (p >= b) break;
      start = p + 1;
    }
    std::vector<TemplatePiece> pieces;
    if (!render_template(name, args, &pieces)) return;
    for (const TemplatePiece& piece : pieces) {
      if (!piece.is_arg) put(piece.literal);
      if (!piece.is_arg) continue;
      const auto at = static_cast<size_t>(piece.arg.data() - s_.data());
      inline_span(at, at + piece.arg.size(), depth + 1);
    }
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
    // An interlanguage link has no label; "[[voy:Paris|the guide]]" or "[[doi:...|a paper]]" is
    // an interwiki link that shows its label.
    const bool gone = iequals(ns, "file") || iequals(ns, "image") || iequals(ns, "media") ||
                      iequals(ns, "category") || (is_language(ns) && bar == b);
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
  // more than five leave the extra ones, as MediaWiki renders them. The ''' that
  // odd_bold_apostrophe chose for this line is an apostrophe and an italic mark.
  size_t quotes(size_t i, size_t end) {
    size_t r = i;
    while (r < end && s_[r] == '\'') ++r;
    const bool chosen = (r - i == 3 && i == apostrophe_at_) || (r - i == 4 && i + 1 == apostrophe_at_);
    if (r - i == 1 || r - i == 4) put("'");
    if (chosen) put("'");
    if (r - i > 5) put(s_.substr(i, r - i - 5));
    return r;
  }

  // MediaWiki's rule for a line whose italic ('') and bold (''') marks are both odd in number:
  // one ''' is an apostrophe and then an italic mark ("''Iliad'''s" shows "Iliad's"): the
  // first after a one-letter word, else the first after any word, else the first after a
  // space. Returns where that ''' starts in the line [a, e), or kNone.
  size_t odd_bold_apostrophe(size_t a, size_t e) const {
    int italics = 0, bolds = 0;
    size_t single = kNone, multi = kNone, space = kNone;
    for (size_t p = a; p < e;) {
      size_t r = p;
      while (r < e && s_[r] == '\'') ++r;
      if (r == p) {
        ++p;
        continue;
      }
      const size_t n = r - p == 4 ? 3 : std::min<size_t>(r - p, 5);  // four: an apostrophe, then '''
      const size_t start = r - n;
      italics += n == 2 || n == 5;
      bolds += n == 3 || n == 5;
      if (n == 3) {
        const char x1 = start > a ? s_[start - 1] : ' ', x2 = start > a + 1 ? s_[start - 2] : ' ';
        size_t& first = x1 == ' ' ? space : x2 == ' ' ? single : multi;
        if (first == kNone) first = start;
      }
      p = r;
    }
    if (italics % 2 == 0 || bolds % 2 == 0) return kNone;
    return single != kNone ? single : multi != kNone ? multi : space;
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
  size_t apostrophe_at_ = kNone;  // this line's ''' that shows an apostrophe (quotes())
  int skip_level_ = 0;  // inside a dropped section: its heading's level
};

}  // namespace

std::string wikitext_to_plain(std::string_view wikitext) {
  size_t i = 0;
  while (i < wikitext.size() && is_space(wikitext[i])) ++i;
  if (starts_at(wikitext, i, "#redirect") || is_disambiguation_page(wikitext)) return "";
  return wikitext_paragraphs(Pass2(Pass1(wikitext).run()).run());
}

}  // namespace lansbert
