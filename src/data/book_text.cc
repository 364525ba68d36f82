// book_to_plain: Project Gutenberg-style plain-text books to prose paragraphs (book_text.h).
#include "book_text.h"

#include <vector>

#include "wikitext_chars.h"

namespace lansbert {
namespace {

using wikitext::contains;
using wikitext::is_blank;
using wikitext::is_lower;
using wikitext::lower;
using wikitext::starts_at;
using wikitext::trim;

// "*** START OF THE PROJECT GUTENBERG EBOOK X ***" (and "***START OF", "THIS"), or the
// end of an old header's small print.
bool is_header_end(std::string_view line) {
  const std::string_view t = trim(line);
  return ((starts_at(t, 0, "*** start of") || starts_at(t, 0, "***start of")) && contains(t, "project gutenberg")) ||
         starts_at(t, 0, "*end*the small print");
}

bool is_footer_start(std::string_view line) {
  const std::string_view t = trim(line);
  return ((starts_at(t, 0, "*** end of") || starts_at(t, 0, "***end of")) && contains(t, "project gutenberg")) ||
         starts_at(t, 0, "end of the project gutenberg") || starts_at(t, 0, "end of project gutenberg");
}

// The transcriber's credit that opens the text after the header.
bool is_credit(std::string_view paragraph) {
  for (const std::string_view p : {"produced by", "e-text prepared by", "etext prepared by", "transcribed from",
                                   "this etext was prepared by", "this ebook was produced by"}) {
    if (starts_at(paragraph, 0, p)) return true;
  }
  return false;
}

// Lines, without a CR before the LF.
std::vector<std::string_view> lines_of(std::string_view text) {
  std::vector<std::string_view> lines;
  while (!text.empty()) {
    const size_t nl = text.find('\n');
    std::string_view line = text.substr(0, nl);
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    lines.push_back(line);
    if (nl == std::string_view::npos) break;
    text.remove_prefix(nl + 1);
  }
  return lines;
}

// [Illustration ...], [Footnote ...], [Sidenote ...] out of a joined paragraph, nested brackets
// matched; an unclosed one runs to the paragraph's end.
std::string drop_notes(std::string_view p) {
  std::string out;
  out.reserve(p.size());
  for (size_t i = 0; i < p.size();) {
    if (p[i] == '[' && (starts_at(p, i, "[illustration") || starts_at(p, i, "[footnote") || starts_at(p, i, "[sidenote"))) {
      int depth = 0;
      size_t j = i;
      for (; j < p.size(); ++j) {
        if (p[j] == '[') ++depth;
        if (p[j] == ']' && --depth == 0) break;
      }
      i = j + 1;
      continue;
    }
    out += p[i++];
  }
  return out;
}

// Italics marks: an underscore at a word's edge (_word_, _two words_); snake_case stays.
std::string drop_italics(std::string_view p) {
  const auto word = [](char c) { return wikitext::is_alnum(c) || static_cast<unsigned char>(c) >= 0x80; };
  std::string out;
  out.reserve(p.size());
  for (size_t i = 0; i < p.size(); ++i) {
    if (p[i] == '_') {
      const bool inside = i > 0 && i + 1 < p.size() && word(p[i - 1]) && word(p[i + 1]);
      if (!inside) continue;
    }
    out += p[i];
  }
  return out;
}

// One space for each run of blanks, none at the ends.
std::string collapse(std::string_view p) {
  std::string out;
  out.reserve(p.size());
  for (const char c : p) {
    if (is_blank(c)) {
      if (!out.empty() && out.back() != ' ') out += ' ';
    } else {
      out += c;
    }
  }
  while (!out.empty() && out.back() == ' ') out.pop_back();
  return out;
}

// Headings ("CHAPTER IV.", "THE END"): ASCII letters, none lower case. Ornaments and numbers
// ("* * *", "1."): no letter. Other scripts (bytes >= 0x80) count as letters of no case.
bool is_prose(std::string_view p) {
  bool upper = false, other_script = false;
  for (const char c : p) {
    if (is_lower(c)) return true;
    upper |= c >= 'A' && c <= 'Z';
    other_script |= static_cast<unsigned char>(c) >= 0x80;
  }
  return other_script && !upper;
}

}  // namespace

std::string book_to_plain(std::string_view text) {
  if (starts_at(text, 0, "\xEF\xBB\xBF")) text.remove_prefix(3);
  std::vector<std::string_view> lines = lines_of(text);
  size_t first = 0, end = lines.size();
  bool header = false;
  for (size_t i = 0; i < lines.size(); ++i) {
    if (is_header_end(lines[i])) {
      first = i + 1;
      header = true;
      break;
    }
  }
  for (size_t i = first; i < lines.size(); ++i) {
    if (is_footer_start(lines[i])) {
      end = i;
      break;
    }
  }
  std::string out, joined;
  bool opening = header;  // the credit is looked for only where a header was dropped
  const auto flush = [&] {
    std::string p = collapse(drop_italics(drop_notes(joined)));
    joined.clear();
    if (p.empty() || !is_prose(p)) return;
    if (opening && is_credit(p)) return;
    opening = false;
    if (!out.empty()) out += '\n';
    out += p;
  };
  for (size_t i = first; i < end; ++i) {
    const std::string_view line = trim(lines[i]);
    if (line.empty()) {
      flush();
      continue;
    }
    if (!joined.empty()) joined += ' ';
    joined += line;
  }
  flush();
  return out;
}

}  // namespace lansbert
