// CorpusFile: one input file of `lansbert prep`, `vocab` or `tokenize`, read as units of text in
// bounded memory (a book: the file's size). Four formats:
//   text       one sentence or paragraph per line; a blank line ends a document (BERT's format).
//   jsonl      one JSON object per line (JSON Lines, as Hugging Face datasets, The Pile or C4 ship
//              corpora), its string field `json_key` one document; the newlines inside it
//              separate paragraphs as a text file's lines do. Blank lines are skipped.
//   mediawiki  a MediaWiki XML export (Wikipedia's dumps): each article a document, its
//              wikitext made prose, a paragraph a line (mediawiki_pages.h, wikitext.h).
//   book       the whole file one document, a book as plain text (Project Gutenberg's): wrapped
//              lines joined into paragraphs, the licence and headings dropped (book_text.h).
// Each may be compressed, with gzip (zlib), Zstandard (libzstd) or bzip2 (libbz2), recognised by
// its first bytes, not its name, on stdin too (text_sources.h). "auto" picks jsonl for names
// ending in .jsonl, .ndjson or .json, mediawiki for .xml (any case, before any .gz, .zst or
// .bz2; also Wikipedia's split dumps, `*.xml-p1p41242.bz2`), else text; a file it reads as text
// whose first non-blank line is a JSON record with the `json_key` string field, XML, or names
// Project Gutenberg, is refused (it would be one document of markup, or a document per paragraph
// with the licence in).
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "lansbert/core/status.h"

namespace lansbert {

class MediaWikiPages;
class TextSource;

enum class CorpusFormat { kText, kJsonl, kMediaWiki, kBook };

struct CorpusOptions {
  std::string format = "auto";  // auto, text, jsonl, mediawiki or book (--input-format)
  std::string json_key = "text";  // --json-key
  // JSON Lines: this many consecutive records make one document (--records-per-document), for
  // datasets of one sentence per record in reading order (Hugging Face's bookcorpus), whose
  // records alone give next-sentence prediction nothing. Read by TextDocumentReader.
  int records_per_document = 1;
};
// The most records one document may gather.
inline constexpr int kMaxRecordsPerDocument = 1 << 20;

// invalid_argument naming --input-format or --json-key when `o` holds neither known format nor
// a key.
Status check_corpus_options(const CorpusOptions& o);
// The format `path` is read in under `o` (REQUIRES: check_corpus_options(o) is ok).
CorpusFormat corpus_format_of(const std::string& path, const CorpusOptions& o);

class CorpusFile {
 public:
  CorpusFile();
  ~CorpusFile();
  CorpusFile(const CorpusFile&) = delete;
  CorpusFile& operator=(const CorpusFile&) = delete;

  // "-" reads stdin (name "<stdin>"). not_found naming the file when it is not there, io_error
  // when it cannot be opened.
  Status open(const std::string& path, const CorpusOptions& o);
  // The next unit of text: a line (text; "" for a blank line, which ends a document), a
  // record's document (jsonl), an article's prose (mediawiki; articles left with no prose
  // are skipped) or the whole book's (book; "" and *got false when nothing is left). *got is false at the end of the file. A compressed stream that is damaged,
  // cut short or followed by other bytes is corrupt, a record that is not a JSON object with a
  // string field `json_key` is corrupt, XML that is not a MediaWiki export is corrupt, each
  // naming the file and line; a read that fails is io_error.
  Status next(std::string* text, bool* got);

  CorpusFormat format() const { return format_; }
  const std::string& name() const { return name_; }
  // 1-based number of the last line read (mediawiki: of the last article's <page> tag).
  int64_t line_no() const { return line_no_; }
  // Where the last line read (or <page> tag) starts in the text (after decompression): a byte
  // offset.
  uint64_t line_start() const { return line_start_; }
  // Bytes of the file as stored (compressed) consumed so far: for progress against its size.
  uint64_t offset() const;


 private:
  Status next_line(std::string* line, bool* got);
  Status check_first_text_line(const std::string& line) const;

  std::unique_ptr<TextSource> source_;  // the file as it is, or decoded (text_sources.h)
  std::unique_ptr<MediaWikiPages> pages_;  // mediawiki: the XML over source_
  CorpusFormat format_ = CorpusFormat::kText;
  std::string key_, name_, buf_;
  size_t begin_ = 0, end_ = 0;
  uint64_t consumed_ = 0;  // text bytes moved out of buf_ before begin_'s
  uint64_t line_start_ = 0;
  int64_t line_no_ = 0;
  bool eof_ = false;
  bool sniff_ = false;  // "auto" read this file as text: look at its first line
};

}  // namespace lansbert
