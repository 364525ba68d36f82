// LineReader: reads a file or stdin line by line through one large buffer, so the
// tokenize and vocab commands stream text of any size in bounded memory. Lines are
// returned without their '\n'; the last line may lack one.
#pragma once

#include <cstdio>
#include <cstring>
#include <string>
#include <string_view>

#include "lansbert/core/status.h"

namespace lansbert::cli {

class LineReader {
 public:
  LineReader() = default;
  LineReader(const LineReader&) = delete;
  LineReader& operator=(const LineReader&) = delete;
  ~LineReader() {
    if (file_ != nullptr && file_ != stdin) std::fclose(file_);
  }

  // An empty path or "-" means stdin; name() is then "<stdin>".
  Status open(const std::string& path) {
    if (path.empty() || path == "-") {
      file_ = stdin;
      name_ = "<stdin>";
    } else {
      file_ = std::fopen(path.c_str(), "rb");
      name_ = path;
      if (file_ == nullptr) return Status::not_found(path + ": cannot open");
    }
    buf_.resize(1 << 20);
    return Status::ok();
  }

  // Sets *line to the next line (valid until the next call); returns false at the end.
  bool next(std::string_view* line) {
    for (;;) {
      const char* b = buf_.data() + begin_;
      const void* nl = std::memchr(b, '\n', end_ - begin_);
      if (nl != nullptr) {
        const size_t len = static_cast<const char*>(nl) - b;
        *line = std::string_view(b, len);
        line_offset_ = consumed_ + begin_;
        begin_ += len + 1;
        ++line_no_;
        return true;
      }
      if (eof_) {
        if (begin_ == end_) return false;
        *line = std::string_view(b, end_ - begin_);
        line_offset_ = consumed_ + begin_;
        begin_ = end_;
        ++line_no_;
        return true;
      }
      // Move the partial line to the front; grow when one line fills the buffer.
      const size_t keep = end_ - begin_;
      std::memmove(buf_.data(), b, keep);
      consumed_ += begin_;
      begin_ = 0;
      end_ = keep;
      if (end_ == buf_.size()) buf_.resize(buf_.size() * 2);
      const size_t got = std::fread(buf_.data() + end_, 1, buf_.size() - end_, file_);
      end_ += got;
      if (got == 0) eof_ = true;
    }
  }

  bool failed() const { return file_ != nullptr && std::ferror(file_) != 0; }
  const std::string& name() const { return name_; }
  size_t line_no() const { return line_no_; }          // 1-based number of the last line
  size_t line_offset() const { return line_offset_; }  // its first byte within the file

 private:
  std::FILE* file_ = nullptr;
  std::string name_;
  std::string buf_;
  size_t begin_ = 0, end_ = 0, consumed_ = 0;
  size_t line_no_ = 0, line_offset_ = 0;
  bool eof_ = false;
};

}  // namespace lansbert::cli
