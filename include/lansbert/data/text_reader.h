// TextDocumentReader: streams corpora as documents of sentences, the input of `lansbert prep`.
// Each file is text (one sentence or paragraph per line; a blank line, or the end of a file,
// ends a document), JSON Lines (one document a record, or CorpusOptions::records_per_document
// records; the end of a file ends one too), a MediaWiki XML export (one document an article)
// or a book (one document a file), each plain or compressed (CorpusFile, corpus_file.h). Paragraph lines
// are cut into sentences by split_sentences.
// Memory is one document at a time.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "lansbert/core/status.h"
#include "lansbert/data/corpus_file.h"

namespace lansbert {

// Cuts a line into sentences after '.', '!' or '?' (plus any closing quotes or brackets)
// when followed by whitespace and then an uppercase ASCII letter, a digit or an opening
// quote/bracket. Deliberately simple: "e.g. the" stays whole, "Dr. Smith" is cut. Pieces
// are trimmed; empty pieces are dropped.
void split_sentences(std::string_view line, std::vector<std::string>* out);

class TextDocumentReader {
 public:
  // REQUIRES: open() before next(). Missing files are a not_found naming the file; "-" is
  // stdin (a pipe's size is unknown until it ends: total_known() is false; a file's counts
  // from where stdin stands).
  Status open(const std::vector<std::string>& paths, const CorpusOptions& options = {});
  // Reads the next non-empty document into *sentences (with each sentence's file and line
  // in *origins, "file:line", for error messages). Sets *done at the end of the input.
  Status next(std::vector<std::string>* sentences, std::vector<std::string>* origins, bool* done);
  // Bytes of the input files consumed (as stored: compressed bytes), of total_bytes().
  uint64_t bytes_read() const { return finished_bytes_ + (in_ ? in_->offset() : 0); }
  uint64_t total_bytes() const { return total_bytes_; }  // of the inputs but a stdin pipe
  bool total_known() const { return total_known_; }

 private:
  std::vector<std::string> paths_;
  std::vector<uint64_t> sizes_;
  CorpusOptions options_;
  size_t file_ = 0;
  std::unique_ptr<CorpusFile> in_;
  uint64_t finished_bytes_ = 0, total_bytes_ = 0;
  bool total_known_ = true;
};

}  // namespace lansbert
