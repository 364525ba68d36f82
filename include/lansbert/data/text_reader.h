// TextDocumentReader: streams plain-text corpora as documents of sentences, the input of
// `lansbert prep`. One sentence or paragraph per line; a blank line (or the end of a file)
// ends a document. Paragraph lines are cut into sentences by split_sentences. Memory is
// one document at a time.
#pragma once

#include <cstdint>
#include <fstream>
#include <string>
#include <string_view>
#include <vector>

#include "lansbert/core/status.h"

namespace lansbert {

// Cuts a line into sentences after '.', '!' or '?' (plus any closing quotes or brackets)
// when followed by whitespace and then an uppercase ASCII letter, a digit or an opening
// quote/bracket. Deliberately simple: "e.g. the" stays whole, "Dr. Smith" is cut. Pieces
// are trimmed; empty pieces are dropped.
void split_sentences(std::string_view line, std::vector<std::string>* out);

class TextDocumentReader {
 public:
  // REQUIRES: open() before next(). Missing files are a not_found naming the file.
  Status open(const std::vector<std::string>& paths);
  // Reads the next non-empty document into *sentences (with each sentence's file and line
  // in *origins, "file:line", for error messages). Sets *done at the end of the input.
  Status next(std::vector<std::string>* sentences, std::vector<std::string>* origins, bool* done);
  uint64_t bytes_read() const { return bytes_read_; }
  uint64_t total_bytes() const { return total_bytes_; }

 private:
  std::vector<std::string> paths_;
  size_t file_ = 0;
  int64_t line_no_ = 0;
  std::ifstream in_;
  uint64_t bytes_read_ = 0, total_bytes_ = 0;
};

}  // namespace lansbert
