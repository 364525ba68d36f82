// Sentence splitting and the streaming document reader for `lansbert prep`.
#include "lansbert/data/text_reader.h"

#include <fmt/format.h>

#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>

namespace lansbert {
namespace {

bool is_space(char c) { return c == ' ' || c == '\t' || c == '\r' || c == '\n' || c == '\f' || c == '\v'; }
bool is_closer(char c) { return c == '"' || c == '\'' || c == ')' || c == ']'; }
bool starts_sentence(char c) {
  return (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '"' || c == '\'' || c == '(' || c == '[';
}

void push_trimmed(std::string_view s, std::vector<std::string>* out) {
  size_t b = 0, e = s.size();
  while (b < e && is_space(s[b])) ++b;
  while (e > b && is_space(s[e - 1])) --e;
  if (e > b) out->emplace_back(s.substr(b, e - b));
}

}  // namespace

void split_sentences(std::string_view line, std::vector<std::string>* out) {
  size_t start = 0, i = 0;
  while (i < line.size()) {
    const char c = line[i];
    if (c == '.' || c == '!' || c == '?') {
      size_t j = i + 1;
      while (j < line.size() && is_closer(line[j])) ++j;
      size_t k = j;
      while (k < line.size() && is_space(line[k])) ++k;
      if (k > j && k < line.size() && starts_sentence(line[k])) {
        push_trimmed(line.substr(start, j - start), out);
        start = k;
        i = k;
        continue;
      }
    }
    ++i;
  }
  push_trimmed(line.substr(start), out);
}

Status TextDocumentReader::open(const std::vector<std::string>& paths, const CorpusOptions& options) {
  LB_RETURN_IF_ERROR(check_corpus_options(options));
  paths_ = paths;
  options_ = options;
  sizes_.clear();
  total_bytes_ = finished_bytes_ = 0;
  total_known_ = true;
  for (const auto& p : paths_) {
    if (p == "-") {  // stdin: a pipe's size is not known before it ends; a file's is
      struct stat st {};
      const bool file = ::fstat(STDIN_FILENO, &st) == 0 && S_ISREG(st.st_mode);
      const off_t at = file ? ::lseek(STDIN_FILENO, 0, SEEK_CUR) : 0;  // a file may be read from partway
      sizes_.push_back(file && at >= 0 && at <= st.st_size ? uint64_t(st.st_size - at) : 0);
      total_bytes_ += sizes_.back();
      total_known_ = total_known_ && file;
      continue;
    }
    std::error_code ec;
    const auto size = std::filesystem::file_size(p, ec);
    if (ec) return Status::not_found(fmt::format("{}: cannot read input: {}", p, ec.message()));
    sizes_.push_back(size);
    total_bytes_ += size;
  }
  file_ = 0;
  in_.reset();
  return Status::ok();
}

Status TextDocumentReader::next(std::vector<std::string>* sentences, std::vector<std::string>* origins,
                                bool* done) {
  sentences->clear();
  origins->clear();
  *done = false;
  std::string text;
  int records = 0;  // JSON Lines records (or articles, or books) in this document
  while (file_ < paths_.size()) {
    if (!in_) {
      in_ = std::make_unique<CorpusFile>();
      LB_RETURN_IF_ERROR(in_->open(paths_[file_], options_));
    }
    for (bool got = true;;) {
      LB_RETURN_IF_ERROR(in_->next(&text, &got));
      if (!got) break;
      const size_t before = sentences->size();
      if (in_->format() == CorpusFormat::kText) {
        split_sentences(text, sentences);
        if (sentences->size() == before) {  // a blank line ends a document
          if (!sentences->empty()) return Status::ok();
          continue;
        }
      } else {
        // A record (or an article) is a document; the lines of its text are a text file's lines.
        for (size_t b = 0; b <= text.size();) {
          const size_t e = std::min(text.find('\n', b), text.size());
          split_sentences(std::string_view(text).substr(b, e - b), sentences);
          b = e + 1;
        }
      }
      origins->resize(sentences->size(), fmt::format("{}:{}", in_->name(), in_->line_no()));
      if (in_->format() == CorpusFormat::kText || sentences->size() == before) continue;
      const int per_document = in_->format() == CorpusFormat::kJsonl ? options_.records_per_document : 1;
      if (++records >= per_document) return Status::ok();
    }
    finished_bytes_ += paths_[file_] == "-" ? in_->offset() : sizes_[file_];
    in_.reset();
    ++file_;
    if (!sentences->empty()) return Status::ok();  // the end of a file ends a document
  }
  *done = sentences->empty();
  return Status::ok();
}

}  // namespace lansbert
