// CorpusFile: text, JSON Lines and MediaWiki XML corpora, plain, gzip, Zstandard or bzip2 (see
// corpus_file.h).
#include "lansbert/data/corpus_file.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstring>
#include <nlohmann/json.hpp>

#include "lansbert/core/json_reason.h"
#include "book_text.h"
#include "mediawiki_pages.h"
#include "text_sources.h"
#include "wikitext.h"
#include "wikitext_chars.h"

namespace lansbert {

namespace {
// `s` ends with `tail`, ignoring ASCII case (C4.JSON.GZ is C4.json.gz).
bool ends_with(const std::string& s, const std::string& tail) {
  if (s.size() < tail.size()) return false;
  return std::equal(tail.begin(), tail.end(), s.end() - tail.size(),
                    [](char a, char b) { return std::tolower(uint8_t(a)) == std::tolower(uint8_t(b)); });
}

// Wikipedia's split dumps end in ".xml-p<first page>p<last page>" before the ".bz2":
// enwiki-20240601-pages-articles1.xml-p1p41242.bz2.
bool ends_with_split_xml(const std::string& s) {
  const size_t at = s.rfind(".xml-p");
  if (at == std::string::npos) return false;
  const std::string rest = s.substr(at + 6);
  const size_t p = rest.find('p');
  const auto digits = [](const std::string& d) {
    return !d.empty() && std::all_of(d.begin(), d.end(), [](char c) { return c >= '0' && c <= '9'; });
  };
  return p != std::string::npos && digits(rest.substr(0, p)) && digits(rest.substr(p + 1));
}
}  // namespace

Status check_corpus_options(const CorpusOptions& o) {
  if (o.format != "auto" && o.format != "text" && o.format != "jsonl" && o.format != "mediawiki" && o.format != "book")
    return Status::invalid_argument("--input-format " + o.format + ": expected auto, text, jsonl, mediawiki or book");
  if (o.json_key.empty()) return Status::invalid_argument("--json-key: an empty field name");
  if (!(o.records_per_document >= 1 && o.records_per_document <= kMaxRecordsPerDocument))
    return Status::invalid_argument(fmt::format("--records-per-document {}: must be in [1, {}]", o.records_per_document,
                                                kMaxRecordsPerDocument));
  return Status::ok();
}

CorpusFormat corpus_format_of(const std::string& path, const CorpusOptions& o) {
  if (o.format == "text") return CorpusFormat::kText;
  if (o.format == "jsonl") return CorpusFormat::kJsonl;
  if (o.format == "mediawiki") return CorpusFormat::kMediaWiki;
  if (o.format == "book") return CorpusFormat::kBook;
  std::string name = path;
  for (const char* packed : {".gz", ".zst", ".bz2"})
    if (ends_with(name, packed)) name.resize(name.size() - std::strlen(packed));
  if (ends_with(name, ".xml") || ends_with_split_xml(name)) return CorpusFormat::kMediaWiki;
  // .json too: C4 ships c4-train.00000-of-01024.json.gz and Dataset.to_json writes *.json,
  // both JSON Lines (one JSON document per file is no corpus).
  for (const char* jsonl : {".jsonl", ".ndjson", ".json"})
    if (ends_with(name, jsonl)) return CorpusFormat::kJsonl;
  return CorpusFormat::kText;
}

CorpusFile::CorpusFile() = default;
CorpusFile::~CorpusFile() = default;

Status CorpusFile::open(const std::string& path, const CorpusOptions& o) {
  LB_RETURN_IF_ERROR(check_corpus_options(o));
  const bool is_stdin = path == "-";
  name_ = is_stdin ? "<stdin>" : path;
  const int fd = is_stdin ? ::dup(STDIN_FILENO) : ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    const std::string m = fmt::format("{}: cannot open: {}", name_, std::strerror(errno));
    return errno == ENOENT || errno == ENOTDIR ? Status::not_found(m) : Status::io_error(m);
  }
  pages_.reset();
  source_.reset();
  LB_RETURN_IF_ERROR(open_text_source(fd, name_, &source_));
  sniff_ = o.format == "auto";
  format_ = corpus_format_of(path, o);
  if (format_ == CorpusFormat::kMediaWiki) pages_ = std::make_unique<MediaWikiPages>(source_.get(), name_);
  key_ = o.json_key;
  buf_.assign(1 << 20, '\0');
  begin_ = end_ = 0;
  consumed_ = line_start_ = 0;
  line_no_ = 0;
  eof_ = false;
  return Status::ok();
}

uint64_t CorpusFile::offset() const { return source_ ? source_->offset() : 0; }

// Lines through one buffer that grows to hold the longest line (a JSON record can be a whole
// book); the last line may lack its '\n'.
Status CorpusFile::next_line(std::string* line, bool* got) {
  for (;;) {
    const char* b = buf_.data() + begin_;
    if (const void* nl = std::memchr(b, '\n', end_ - begin_)) {
      const size_t len = static_cast<const char*>(nl) - b;
      line->assign(b, len);
      line_start_ = consumed_ + begin_;
      begin_ += len + 1;
      ++line_no_;
      *got = true;
      return Status::ok();
    }
    if (eof_) {
      *got = begin_ < end_;
      if (*got) {
        line->assign(b, end_ - begin_);
        line_start_ = consumed_ + begin_;
        ++line_no_;
      }
      begin_ = end_;
      return Status::ok();
    }
    const size_t keep = end_ - begin_;
    std::memmove(buf_.data(), b, keep);
    consumed_ += begin_;
    begin_ = 0;
    end_ = keep;
    if (end_ == buf_.size()) buf_.resize(buf_.size() * 2);
    std::string why;
    bool damaged = false;
    const int64_t n = source_->read(buf_.data() + end_, buf_.size() - end_, &why, &damaged);
    if (n < 0) {
      // A damaged or cut-off stream is content that fails validation; anything else is I/O. The
      // line count is of the lines handed out (the text is read ahead), the offset the file's.
      const std::string m = fmt::format("{}: cannot read after line {} (byte offset {} of the file): {}", name_,
                                        line_no_, source_->offset(), why);
      return damaged ? Status::corrupt(m) : Status::io_error(m);
    }
    end_ += size_t(n);
    if (n == 0) eof_ = true;
  }
}

// "auto" chose text by the name: a first line that is a JSON record, or XML, would make the whole
// file one document of markup, quietly.
Status CorpusFile::check_first_text_line(const std::string& line) const {
  const auto refuse = [&](const std::string& what, const char* format, const char* as) {
    return Status::invalid_argument(fmt::format(
        "{}:{}: {} in a file read as text (--input-format auto, by its name): pass --input-format {} to read it as "
        "{}, or --input-format text to read it as text",
        name_, line_no_, what, format, as));
  };
  size_t first = line.find_first_not_of(" \t\r");
  if (line.compare(first, 3, "\xEF\xBB\xBF") == 0) first += 3;  // a byte order mark
  if (line.compare(first, 5, "<?xml") == 0 || line.compare(first, 10, "<mediawiki") == 0)
    return refuse("XML", "mediawiki", "a MediaWiki export");
  const nlohmann::json j = nlohmann::json::parse(line, nullptr, /*allow_exceptions=*/false);
  if (j.is_object() && j.contains(key_) && j[key_].is_string())
    return refuse(fmt::format("a JSON record with a string field '{}'", key_), "jsonl", "JSON Lines");
  // A book's first line, "The Project Gutenberg eBook of ..." (or an old e-text's "**The Project
  // Gutenberg Etext of ...**"): read as text, each paragraph would be a document and the licence
  // would be trained on. Only that opening: a line that mentions Project Gutenberg is text.
  first = line.find_first_not_of(" \t*", first);
  if (first != std::string::npos) {
    for (const char* opening : {"the project gutenberg ebook", "the project gutenberg etext",
                                "the project gutenberg's", "project gutenberg's"}) {
      if (wikitext::starts_at(line, first, opening))
        return refuse("a Project Gutenberg book", "book", "one document without its licence");
    }
  }
  return Status::ok();
}

Status CorpusFile::next(std::string* text, bool* got) {
  if (format_ == CorpusFormat::kText) {
    LB_RETURN_IF_ERROR(next_line(text, got));
    if (sniff_ && *got && text->find_first_not_of(" \t\r") != std::string::npos) {
      sniff_ = false;
      return check_first_text_line(*text);
    }
    return Status::ok();
  }
  if (format_ == CorpusFormat::kBook) {
    // The whole file is one document: read it, then make it prose (book_text.h).
    if (eof_ && begin_ == end_) {
      *got = false;
      return Status::ok();
    }
    std::string book, line;
    for (bool more = true;;) {
      LB_RETURN_IF_ERROR(next_line(&line, &more));
      if (!more) break;
      book += line;
      book += '\n';
    }
    *text = book_to_plain(book);
    line_no_ = 1;  // messages name the book's first line: its text is one unit
    line_start_ = 0;
    *got = !text->empty();
    return Status::ok();
  }
  if (format_ == CorpusFormat::kMediaWiki) {
    for (MediaWikiPage page;;) {
      LB_RETURN_IF_ERROR(pages_->next(&page, got));
      if (!*got) return Status::ok();
      *text = wikitext_to_plain(page.wikitext);
      line_no_ = page.line;
      line_start_ = page.byte;
      if (!text->empty()) return Status::ok();  // an article that is all tables, lists or templates
    }
  }
  std::string line;
  for (;;) {
    LB_RETURN_IF_ERROR(next_line(&line, got));
    if (!*got) return Status::ok();
    if (line.find_first_not_of(" \t\r") == std::string::npos) continue;  // a blank line between records
    nlohmann::json j;
    try {
      j = nlohmann::json::parse(line);
    } catch (const nlohmann::json::parse_error& e) {
      // nlohmann counts from 1: e.byte - 1 is the offset of the byte it stopped at. Its reason
      // ("invalid string: ill-formed UTF-8 byte") sits between " - " and "; last read".
      const std::string what = e.what();
      const size_t from = what.find(" - "), to = what.find("; last read");
      const std::string why = from != std::string::npos && to > from ? ": " + what.substr(from + 3, to - from - 3) : "";
      return Status::corrupt(fmt::format("{}:{}: not a JSON record (at byte offset {} of the line{})", name_,
                                         line_no_, e.byte - 1, why));
    } catch (const nlohmann::json::out_of_range& e) {  // a number beyond a double: 1e309
      return Status::corrupt(fmt::format("{}:{}: a JSON number beyond a double's range ({})", name_, line_no_,
                                         json_reason(e)));
    }
    const auto it = j.is_object() ? j.find(key_) : j.end();
    if (!j.is_object() || it == j.end() || !it->is_string())
      return Status::corrupt(fmt::format("{}:{}: not a JSON object with a string field '{}' (--json-key)", name_,
                                         line_no_, key_));
    *text = it->get<std::string>();
    return Status::ok();
  }
}

}  // namespace lansbert
