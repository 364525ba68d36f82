// CorpusFile: text and JSON Lines corpora, plain or gzip-compressed (see corpus_file.h).
#include "lansbert/data/corpus_file.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <unistd.h>
#include <zlib.h>

#include <cerrno>
#include <cstring>
#include <nlohmann/json.hpp>

namespace lansbert {

struct CorpusFile::Gz {
  gzFile f = nullptr;
  ~Gz() {
    if (f) gzclose(f);
  }
};

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
  const std::string name = ends_with(path, ".gz") ? path.substr(0, path.size() - 3) : path;
  return ends_with(name, ".jsonl") || ends_with(name, ".ndjson") ? CorpusFormat::kJsonl : CorpusFormat::kText;
}

CorpusFile::CorpusFile() = default;
CorpusFile::~CorpusFile() = default;

Status CorpusFile::open(const std::string& path, const CorpusOptions& o) {
  LB_RETURN_IF_ERROR(check_corpus_options(o));
  gz_ = std::make_unique<Gz>();
  const bool is_stdin = path == "-";
  name_ = is_stdin ? "<stdin>" : path;
  // zlib reads a file that is not gzip as it is ("transparent"), so one path serves both.
  const int fd = is_stdin ? ::dup(STDIN_FILENO) : ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    const std::string m = fmt::format("{}: cannot open: {}", name_, std::strerror(errno));
    return errno == ENOENT || errno == ENOTDIR ? Status::not_found(m) : Status::io_error(m);
  }
  gz_->f = gzdopen(fd, "rb");
  if (!gz_->f) {
    ::close(fd);
    return Status::io_error(name_ + ": cannot open (out of memory)");
  }
  gzbuffer(gz_->f, 1 << 18);
  format_ = corpus_format_of(path, o);
  key_ = o.json_key;
  buf_.assign(1 << 20, '\0');
  begin_ = end_ = 0;
  line_no_ = 0;
  eof_ = false;
  return Status::ok();
}

uint64_t CorpusFile::offset() const {
  const z_off_t at = gz_ && gz_->f ? gzoffset(gz_->f) : 0;
  return at > 0 ? uint64_t(at) : 0;
}

Status CorpusFile::read_error(const char* what) const {
  int err = Z_OK;
  const char* msg = gzerror(gz_->f, &err);
  // A damaged or cut-off gzip stream is content that fails validation; anything else is I/O.
  const bool damaged = err == Z_DATA_ERROR || err == Z_BUF_ERROR;
  std::string why = err == Z_ERRNO ? std::strerror(errno) : msg;
  if (why.rfind("<fd:", 0) == 0 && why.find(": ") != std::string::npos) why.erase(0, why.find(": ") + 2);  // zlib's name
  const std::string m = fmt::format("{}: {} after line {}: {}", name_, what, line_no_, why);
  return damaged ? Status::corrupt(m) : Status::io_error(m);
}

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
    const size_t room = std::min<size_t>(buf_.size() - end_, 1u << 30);  // gzread takes an unsigned count
    const int n = gzread(gz_->f, buf_.data() + end_, unsigned(room));
    int err = Z_OK;
    gzerror(gz_->f, &err);
    if (n < 0 || (err != Z_OK && err != Z_STREAM_END)) return read_error("cannot read");
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
