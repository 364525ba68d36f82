// book_to_plain: Project Gutenberg-style plain-text books to prose paragraphs (book_text.h).
// The rules were checked against real books (a 1990s e-text with the old small-print header,
// a 2008 novel, a 2023 non-fiction book with contents, index and sidenotes, a Spanish novel
// with verse); each comment says which kind of text a rule is for.
#include "book_text.h"

#include <algorithm>
#include <vector>

#include "wikitext_chars.h"

namespace lansbert {
namespace {

using wikitext::contains;
using wikitext::is_blank;
using wikitext::is_lower;
using wikitext::starts_at;
using wikitext::trim;

using Lines = std::vector<std::string_view>;

bool is_upper(char c) { return c >= 'A' && c <= 'Z'; }
bool is_letter(char c) { return is_lower(c) || is_upper(c); }
bool is_digit(char c) { return c >= '0' && c <= '9'; }

// "*** START OF THE PROJECT GUTENBERG EBOOK X ***" (and "***START OF", "THIS"), or the
// end of an old header's small print ("*END*THE SMALL PRINT!" or "*END THE SMALL PRINT!").
bool is_header_end(std::string_view line) {
  const std::string_view t = trim(line);
  return ((starts_at(t, 0, "*** start of") || starts_at(t, 0, "***start of")) && contains(t, "project gutenberg")) ||
         starts_at(t, 0, "*end*the small print") || starts_at(t, 0, "*end the small print");
}

bool is_footer_start(std::string_view line) {
  const std::string_view t = trim(line);
  return ((starts_at(t, 0, "*** end of") || starts_at(t, 0, "***end of")) && contains(t, "project gutenberg")) ||
         starts_at(t, 0, "end of the project gutenberg") || starts_at(t, 0, "end of this project gutenberg") ||
         starts_at(t, 0, "end of project gutenberg");
}

// The transcriber's credit that opens the text after the header.
bool is_credit(std::string_view paragraph) {
  for (const std::string_view p : {"produced by", "e-text prepared by", "etext prepared by", "transcribed from",
                                   "this etext was prepared by", "this ebook was produced by"}) {
    if (starts_at(paragraph, 0, p)) return true;
  }
  return false;
}

// Notes about the edition, not the book.
bool is_transcriber_note(std::string_view paragraph) {
  return starts_at(paragraph, 0, "transcriber's note") || starts_at(paragraph, 0, "transcriber\u2019s note") ||
         starts_at(paragraph, 0, "notes on this etext") || starts_at(paragraph, 0, "[transcriber");
}

// Characters of a UTF-8 line (continuation bytes not counted).
size_t width(std::string_view line) {
  return static_cast<size_t>(std::count_if(line.begin(), line.end(), [](char c) { return (c & 0xC0) != 0x80; }));
}

// Lines, without a CR before the LF.
Lines lines_of(std::string_view text) {
  Lines lines;
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

// A contents or index line: a page number at its end after 3+ spaces, dot leaders or a comma
// ("The Monarchy in France     1", "Malouet, 52", "Feudal rights ..... 4").
bool ends_in_page_number(std::string_view line) {
  line = trim(line);
  while (!line.empty() && (line.back() == '.' || line.back() == ',' || line.back() == ';')) line.remove_suffix(1);
  size_t digits = 0;
  while (digits < line.size() && is_digit(line[line.size() - 1 - digits])) ++digits;
  if (digits == 0 || digits > 4) return false;
  std::string_view before = line.substr(0, line.size() - digits);
  if (!before.empty() && before.back() == ',') return true;
  size_t spaces = 0, dots = 0;
  while (!before.empty() && (before.back() == ' ' || before.back() == '.')) {
    (before.back() == ' ' ? spaces : dots) += 1;
    before.remove_suffix(1);
  }
  return spaces >= 3 || dots >= 3;
}

// Verse (or an address, a list of short lines): 3+ lines, all but the last well short of the
// book's line width. Its lines stay lines, and are not joined into one.
bool is_verse(const Lines& p, size_t book_width) {
  if (p.size() < 3 || book_width == 0) return false;
  for (size_t i = 0; i + 1 < p.size(); ++i) {
    if (4 * width(p[i]) >= 3 * book_width) return false;
  }
  return true;
}

// A paragraph's lines joined by one space; a word broken at a line's end ("sheep-\nbells")
// is joined whole, its hyphen kept.
std::string join(const Lines& p) {
  std::string out;
  for (const std::string_view line : p) {
    if (!out.empty()) {
      const size_t n = out.size();
      const bool broken = n >= 2 && out[n - 1] == '-' && is_letter(out[n - 2]) && is_letter(line.front());
      if (!broken) out += ' ';
    }
    out += line;
  }
  return out;
}

// [Illustration ...], [Footnote ...], [Sidenote ...] out of the text; `*depth` carries a note
// still open at the end of a paragraph into the next one (a note can hold blank lines).
std::string drop_notes(std::string_view p, int* depth) {
  std::string out;
  out.reserve(p.size());
  for (size_t i = 0; i < p.size(); ++i) {
    if (*depth == 0 && p[i] == '[' &&
        (starts_at(p, i, "[illustration") || starts_at(p, i, "[footnote") || starts_at(p, i, "[sidenote"))) {
      *depth = 1;
      continue;
    }
    if (*depth > 0) {
      *depth += p[i] == '[';
      *depth -= p[i] == ']';
      continue;
    }
    out += p[i];
  }
  return out;
}

// Sidenotes between black diamonds (U+2666: "♦Feudal rights.♦"), as newer transcriptions mark them.
std::string drop_diamond_notes(std::string_view p) {
  constexpr std::string_view kDiamond = "\u2666";
  std::string out;
  for (;;) {
    const size_t a = p.find(kDiamond);
    const size_t b = a == std::string_view::npos ? a : p.find(kDiamond, a + kDiamond.size());
    if (b == std::string_view::npos) break;
    out.append(p.substr(0, a));
    p.remove_prefix(b + kDiamond.size());
  }
  out.append(p);
  return out;
}

// Italics and bold marks: an underscore or equals sign at a word's edge (_word_, =Bold=);
// snake_case and a=b stay.
std::string drop_emphasis(std::string_view p) {
  const auto word = [](char c) { return wikitext::is_alnum(c) || static_cast<unsigned char>(c) >= 0x80; };
  std::string out;
  out.reserve(p.size());
  for (size_t i = 0; i < p.size(); ++i) {
    if (p[i] == '_' || p[i] == '=') {
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

// Headings. In capitals ("CHAPTER IV.", "THE END"): ASCII capitals, no lower-case letter, and
// more capitals than characters of other scripts (so "В начале XIX века." stays). Numbered
// ("Chapter 1", "Book Two", "Capítulo primero. Que trata de...").
bool is_heading(std::string_view p) {
  size_t upper = 0, lower = 0, other = 0;
  for (const char c : p) {
    upper += is_upper(c);
    lower += is_lower(c);
    other += (static_cast<unsigned char>(c) & 0xC0) == 0xC0;  // a multi-byte character's first byte
  }
  if (lower == 0) return upper > other;
  for (const std::string_view w : {"chapter ", "book ", "part ", "canto ", "volume ", "section ", "cap\xC3\xADtulo ",
                                   "chapitre ", "kapitel ", "letter "}) {
    if (!starts_at(p, 0, w)) continue;
    const std::string_view rest = p.substr(w.size());
    if (!rest.empty() && (is_digit(rest[0]) || is_upper(rest[0]) || starts_at(rest, 0, "primer") ||
                          starts_at(rest, 0, "segund") || starts_at(rest, 0, "one") || starts_at(rest, 0, "the "))) {
      return true;
    }
  }
  return false;
}

// A chapter's title under its heading, or a byline under the book's ("Loomings.", "Down the
// Rabbit-Hole", "By Jane Austen"): 8 words at most, every word of 4+ letters capitalised, not
// dialogue (a quote or dash first) nor a question or exclamation. Only right after a heading:
// alone, "Call me Ishmael." is a sentence.
bool is_title(std::string_view p) {
  const char first = p.front(), last = p.back();
  if (first == '"' || first == '\'' || first == '-' || starts_at(p, 0, "\u201c") || starts_at(p, 0, "\u2018") ||
      starts_at(p, 0, "\u2014") || last == '?' || last == '!') {
    return false;
  }
  size_t words = 0;
  for (size_t i = 0; i < p.size();) {
    while (i < p.size() && p[i] == ' ') ++i;
    size_t j = i;
    while (j < p.size() && p[j] != ' ') ++j;
    if (j == i) break;
    ++words;
    // Letters of other scripts count, but their case is not known here: such a word is not
    // taken for a capitalised one.
    const auto letter = [](char c) { return is_letter(c) || (static_cast<unsigned char>(c) & 0xC0) == 0xC0; };
    const size_t letters = static_cast<size_t>(std::count_if(p.begin() + i, p.begin() + j, letter));
    const size_t start = std::find_if(p.begin() + i, p.begin() + j, letter) - p.begin();
    if (letters >= 4 && !is_upper(p[start])) return false;
    i = j;
  }
  return words <= 8;
}

// Prose has a letter: ornaments ("* * *") and numbers ("1.") are not.
bool has_letter(std::string_view p) {
  return std::any_of(p.begin(), p.end(), [](char c) { return is_letter(c) || (static_cast<unsigned char>(c) >= 0x80); });
}

// A list entry: a short paragraph (3 lines at most) that does not end a sentence.
bool is_list_entry(const Lines& p) {
  if (p.size() > 3) return false;
  std::string_view t = trim(p.back());
  while (!t.empty() && (t.back() == '"' || t.back() == '\'' || t.back() == ')' || t.back() == ']')) t.remove_suffix(1);
  while (t.size() >= 3 && (starts_at(t, t.size() - 3, "\u201d") || starts_at(t, t.size() - 3, "\u2019"))) {
    t.remove_suffix(3);
  }
  return t.empty() || std::string_view(".?!:;").find(t.back()) == std::string_view::npos;
}

}  // namespace

std::string book_to_plain(std::string_view text) {
  if (starts_at(text, 0, "\xEF\xBB\xBF")) text.remove_prefix(3);
  const Lines lines = lines_of(text);
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
  // Paragraphs: runs of non-blank lines, trimmed.
  std::vector<Lines> paragraphs(1);
  std::vector<size_t> widths;
  for (size_t i = first; i < end; ++i) {
    const std::string_view line = trim(lines[i]);
    if (line.empty()) {
      if (!paragraphs.back().empty()) paragraphs.emplace_back();
      continue;
    }
    paragraphs.back().push_back(line);
    widths.push_back(width(line));
  }
  if (paragraphs.back().empty()) paragraphs.pop_back();
  // The book's line width: the 90th percentile of its lines' (wrapped prose sets it).
  size_t book_width = 0;
  if (!widths.empty()) {
    auto at = widths.begin() + static_cast<std::ptrdiff_t>(widths.size() * 9 / 10);
    std::nth_element(widths.begin(), at, widths.end());
    book_width = *at;
  }
  // Contents, lists and index pages: runs of 5+ list entries.
  std::vector<bool> listed(paragraphs.size(), false);
  for (size_t i = 0; i < paragraphs.size();) {
    size_t j = i;
    while (j < paragraphs.size() && is_list_entry(paragraphs[j])) ++j;
    if (j - i >= 5) std::fill(listed.begin() + static_cast<std::ptrdiff_t>(i), listed.begin() + static_cast<std::ptrdiff_t>(j), true);
    i = std::max(j, i + 1);
  }
  std::string out;
  bool opening = header;  // the credit is looked for only where a header was dropped
  int note_depth = 0;
  bool after_heading = false;
  const auto emit = [&](std::string_view joined) {
    const std::string p = collapse(drop_emphasis(drop_diamond_notes(joined)));
    if (p.empty() || !has_letter(p)) return;
    const bool title = after_heading && is_title(p);
    after_heading = is_heading(p);
    if (after_heading || title || is_transcriber_note(p)) return;
    if (opening && is_credit(p)) return;
    opening = false;
    if (!out.empty()) out += '\n';
    out += p;
  };
  for (size_t k = 0; k < paragraphs.size(); ++k) {
    const Lines& p = paragraphs[k];
    const size_t numbered = static_cast<size_t>(std::count_if(p.begin(), p.end(), ends_in_page_number));
    const bool dropped = listed[k] || 2 * numbered >= p.size();
    if (is_verse(p, book_width)) {
      for (const std::string_view line : p) {
        const std::string kept = drop_notes(line, &note_depth);
        if (!dropped) emit(kept);
      }
    } else {
      const std::string kept = drop_notes(join(p), &note_depth);
      if (!dropped) emit(kept);
    }
    // A note open at a paragraph's end goes on into the next one only if that one closes it
    // (an illustration's caption after a blank line); a bracket never closed ends with it.
    if (note_depth > 0 && (k + 1 == paragraphs.size() || join(paragraphs[k + 1]).find(']') == std::string::npos)) {
      note_depth = 0;
    }
  }
  return out;
}

}  // namespace lansbert
