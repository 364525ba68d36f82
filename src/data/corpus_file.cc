// CorpusFile: text and JSON Lines corpora, plain, gzip or Zstandard (see corpus_file.h).
#include "lansbert/data/corpus_file.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <unistd.h>
#include <zlib.h>
#include <zstd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <nlohmann/json.hpp>

namespace lansbert {

// The file's text, decompressed: read() hands up to n bytes, 0 at the end; a failure is
// *why, and *damaged when the stream is damaged or cut short rather than unreadable.
struct CorpusFile::Source {
  virtual ~Source() = default;
  virtual int64_t read(char* p, size_t n, std::string* why, bool* damaged) = 0;
  virtual uint64_t offset() const = 0;  // bytes of the stored file consumed
};

namespace {

// gzip through zlib, which reads a file that is not gzip as it is ("transparent").
class GzSource final : public CorpusFile::Source {
 public:
  explicit GzSource(gzFile f) : f_(f) { gzbuffer(f_, 1 << 18); }
  ~GzSource() override { gzclose(f_); }
  int64_t read(char* p, size_t n, std::string* why, bool* damaged) override {
    const int got = gzread(f_, p, unsigned(std::min<size_t>(n, 1u << 30)));  // gzread takes an unsigned count
    int err = Z_OK;
    const char* msg = gzerror(f_, &err);
    if (got >= 0 && (err == Z_OK || err == Z_STREAM_END)) return got;
    *why = err == Z_ERRNO ? std::strerror(errno) : msg;
    if (why->rfind("<fd:", 0) == 0 && why->find(": ") != std::string::npos)
      why->erase(0, why->find(": ") + 2);  // zlib's name for the file
    *damaged = err == Z_DATA_ERROR || err == Z_BUF_ERROR;
    return -1;
  }
  uint64_t offset() const override {
    const z_off_t at = gzoffset(f_);
    return at > 0 ? uint64_t(at) : 0;
  }

 private:
  gzFile f_;
};

// Zstandard frames (The Pile's .jsonl.zst), one after another, streamed through one buffer.
class ZstdSource final : public CorpusFile::Source {
 public:
  explicit ZstdSource(int fd) : fd_(fd), in_(ZSTD_DStreamInSize(), '\0'), z_(ZSTD_createDStream()) {}
  ~ZstdSource() override {
    ZSTD_freeDStream(z_);
    ::close(fd_);
  }
  int64_t read(char* p, size_t n, std::string* why, bool* damaged) override {
    ZSTD_outBuffer out{p, n, 0};
    while (out.pos == 0) {
      if (pos_ == len_) {
        const ssize_t got = ::read(fd_, in_.data(), in_.size());
        if (got < 0) {
          *why = std::strerror(errno);
          return -1;
        }
        if (got == 0) {
          if (!frame_open_) return 0;
          *why = "unexpected end of file";  // a frame cut short
          *damaged = true;
          return -1;
        }
        offset_ += uint64_t(got);
        pos_ = 0;
        len_ = size_t(got);
      }
      ZSTD_inBuffer in{in_.data(), len_, pos_};
      const size_t r = ZSTD_decompressStream(z_, &out, &in);
      pos_ = in.pos;
      if (ZSTD_isError(r)) {
        *why = ZSTD_getErrorName(r);
        *damaged = true;
        return -1;
      }
      frame_open_ = r != 0;  // 0: a frame ended here
    }
    return int64_t(out.pos);
  }
  uint64_t offset() const override { return offset_; }

 private:
  int fd_;
  std::string in_;
  ZSTD_DStream* z_;
  size_t pos_ = 0, len_ = 0;
  uint64_t offset_ = 0;
  bool frame_open_ = false;
};

bool is_zstd(int fd) {
  unsigned char magic[4] = {};
  return ::pread(fd, magic, 4, 0) == 4 && magic[0] == 0x28 && magic[1] == 0xb5 && magic[2] == 0x2f && magic[3] == 0xfd;
}

}  // namespace

namespace {
bool ends_with(const std::string& s, const std::string& tail) {
  return s.size() >= tail.size() && s.compare(s.size() - tail.size(), tail.size(), tail) == 0;
}
}  // namespace

Status check_corpus_options(const CorpusOptions& o) {
  if (o.format != "auto" && o.format != "text" && o.format != "jsonl")
    return Status::invalid_argument("--input-format " + o.format + ": expected auto, text or jsonl");
  if (o.json_key.empty()) return Status::invalid_argument("--json-key: an empty field name");
  return Status::ok();
}

CorpusFormat corpus_format_of(const std::string& path, const CorpusOptions& o) {
  if (o.format == "text") return CorpusFormat::kText;
  if (o.format == "jsonl") return CorpusFormat::kJsonl;
  std::string name = path;
  for (const char* packed : {".gz", ".zst"})
    if (ends_with(name, packed)) name.resize(name.size() - std::strlen(packed));
  return ends_with(name, ".jsonl") || ends_with(name, ".ndjson") ? CorpusFormat::kJsonl : CorpusFormat::kText;
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
  source_.reset();
  if (!is_stdin && is_zstd(fd)) {
    source_ = std::make_unique<ZstdSource>(fd);
  } else {  // zlib reads plain text as it is: one path serves both
    gzFile f = gzdopen(fd, "rb");
    if (!f) {
      ::close(fd);
      return Status::io_error(name_ + ": cannot open (out of memory)");
    }
    source_ = std::make_unique<GzSource>(f);
  }
  format_ = corpus_format_of(path, o);
  key_ = o.json_key;
  buf_.assign(1 << 20, '\0');
  begin_ = end_ = 0;
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
      begin_ += len + 1;
      ++line_no_;
      *got = true;
      return Status::ok();
    }
    if (eof_) {
      *got = begin_ < end_;
      if (*got) {
        line->assign(b, end_ - begin_);
        ++line_no_;
      }
      begin_ = end_;
      return Status::ok();
    }
    const size_t keep = end_ - begin_;
    std::memmove(buf_.data(), b, keep);
    begin_ = 0;
    end_ = keep;
    if (end_ == buf_.size()) buf_.resize(buf_.size() * 2);
    std::string why;
    bool damaged = false;
    const int64_t n = source_->read(buf_.data() + end_, buf_.size() - end_, &why, &damaged);
    if (n < 0) {
      // A damaged or cut-off stream is content that fails validation; anything else is I/O.
      const std::string m = fmt::format("{}: cannot read after line {}: {}", name_, line_no_, why);
      return damaged ? Status::corrupt(m) : Status::io_error(m);
    }
    end_ += size_t(n);
    if (n == 0) eof_ = true;
  }
}

Status CorpusFile::next(std::string* text, bool* got) {
  if (format_ == CorpusFormat::kText) return next_line(text, got);
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
