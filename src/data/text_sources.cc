// The plain, gzip, Zstandard and bzip2 text sources (see text_sources.h). gzip goes through
// zlib's inflate rather than its gzread, which reads a file that is not gzip as it is but cannot
// be handed bytes already read (the sniffed magic, on a pipe), and ignores trailing garbage where
// the Zstandard reader refuses it: all three formats now refuse it alike.
#include "text_sources.h"

#include <bzlib.h>
#include <poll.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>
#include <zstd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstring>
#include <string_view>

#include "lansbert/core/stop_signals.h"

namespace lansbert {
namespace {

thread_local const std::atomic<bool>* t_read_cancel = nullptr;  // set_read_cancel()

// The file descriptor's bytes, the ones sniffed at open handed out again first.
class FdBytes {
 public:
  explicit FdBytes(int fd) : fd_(fd) {
    struct stat st {};
    regular_ = ::fstat(fd_, &st) == 0 && S_ISREG(st.st_mode);
  }
  // Hands `head`, read already, out again before the rest.
  void unread(std::string head) {
    consumed_ -= head.size();
    head_ = std::move(head);
    head_at_ = 0;
  }
  ~FdBytes() { ::close(fd_); }
  FdBytes(const FdBytes&) = delete;
  FdBytes& operator=(const FdBytes&) = delete;
  // Up to n bytes: their count, 0 at the end, -1 with errno set on failure.
  int64_t read(char* p, size_t n) {
    if (head_at_ < head_.size()) {
      const size_t k = std::min(n, head_.size() - head_at_);
      std::memcpy(p, head_.data() + head_at_, k);
      head_at_ += k;
      consumed_ += k;
      return int64_t(k);
    }
    for (;;) {
      if (!wait_readable()) return -1;
      const ssize_t got = ::read(fd_, p, n);
      if (got < 0 && errno == EINTR) continue;
      if (got > 0) consumed_ += uint64_t(got);
      return got;
    }
  }
  uint64_t consumed() const { return consumed_; }
  // A pipe (stdin) can hold a read for as long as its writer likes, and a signal may go to
  // another thread than the one reading: so wait in slices and give up, with EINTR, once a stop
  // signal has come (core/stop_signals.h), or with ECANCELED once this thread's reading is
  // called off (set_read_cancel). A regular file is always readable.
  bool wait_readable() {
    if (regular_) return true;
    for (;;) {
      pollfd p{fd_, POLLIN, 0};
      const int r = ::poll(&p, 1, 200);
      if (r > 0 || (r < 0 && errno != EINTR)) return true;  // read() says what happened
      const bool stopped = stop_signal() != 0;
      if (stopped || (t_read_cancel && t_read_cancel->load())) {
        errno = stopped ? EINTR : ECANCELED;
        return false;
      }
    }
  }
  // A decoder's refill of `buf`: the count of bytes read, 0 at a clean end; -1 with *why on a
  // failed read, or at the end while `open` (a gzip member or zstd frame begun and not ended:
  // the file was cut short, *damaged).
  int64_t refill(std::string* buf, bool open, std::string* why, bool* damaged) {
    const int64_t got = read(buf->data(), buf->size());
    if (got < 0) *why = std::strerror(errno);
    if (got != 0 || !open) return got;
    *why = "unexpected end of file";
    *damaged = true;
    return -1;
  }

 private:
  int fd_;
  std::string head_;
  bool regular_ = false;
  size_t head_at_ = 0;
  uint64_t consumed_ = 0;
};

class PlainSource final : public TextSource {
 public:
  explicit PlainSource(std::unique_ptr<FdBytes> in) : in_(std::move(in)) {}
  int64_t read(char* p, size_t n, std::string* why, bool* damaged) override {
    const int64_t got = in_->read(p, n);
    if (got < 0) {
      *why = std::strerror(errno);
      *damaged = false;
    }
    return got;
  }
  uint64_t offset() const override { return in_->consumed(); }

 private:
  std::unique_ptr<FdBytes> in_;
};

// The magic bytes that must open a gzip member or bzip2 stream after another one ends, checked
// as they arrive (a read may end inside them): the decoder's own message for a bad header
// ("incorrect header check") would not say that the data before them was whole.
class NextMagic {
 public:
  explicit NextMagic(std::string_view magic) : magic_(magic) {}
  void expect() { left_ = magic_.size(); }  // a member ended: what follows must be another
  // Checks the bytes of in[0, avail) not checked yet; false at the first one that differs.
  bool check(const void* in, size_t avail) {
    const auto* b = static_cast<const char*>(in);
    for (; left_ > 0 && seen_ < avail; ++seen_, --left_)
      if (b[seen_] != magic_[magic_.size() - left_]) return false;
    return true;
  }
  void consumed() { seen_ = 0; }  // the decoder took the checked bytes into its header

 private:
  std::string_view magic_;
  size_t left_ = 0, seen_ = 0;
};

// One or more gzip members, one after another (`cat a.gz b.gz`), each checked by its CRC-32.
class GzipSource final : public TextSource {
 public:
  explicit GzipSource(std::unique_ptr<FdBytes> in) : in_(std::move(in)), buf_(1 << 18, '\0') {
    ok_ = inflateInit2(&z_, 15 + 16) == Z_OK;  // 16: a gzip header and trailer
  }
  ~GzipSource() override {
    if (ok_) inflateEnd(&z_);
  }
  int64_t read(char* p, size_t n, std::string* why, bool* damaged) override {
    *damaged = false;
    if (n == 0) return 0;
    if (!ok_) {
      *why = "out of memory for zlib";
      return -1;
    }
    z_.next_out = reinterpret_cast<Bytef*>(p);
    z_.avail_out = uInt(std::min<size_t>(n, 1u << 30));
    const uInt room = z_.avail_out;
    while (z_.avail_out == room) {  // until some text comes out, or the end
      if (z_.avail_in == 0) {
        const int64_t got = in_->refill(&buf_, in_member_, why, damaged);
        if (got <= 0) return got;
        z_.next_in = reinterpret_cast<Bytef*>(buf_.data());
        z_.avail_in = uInt(got);
      }
      if (!next_.check(z_.next_in, z_.avail_in)) {
        *why = "bytes after the end of the gzip data that are not another gzip member";
        *damaged = true;
        return -1;
      }
      in_member_ = true;
      const int r = inflate(&z_, Z_NO_FLUSH);
      next_.consumed();
      if (r == Z_STREAM_END) {
        in_member_ = false;
        next_.expect();
        inflateReset(&z_);
      } else if (r != Z_OK && r != Z_BUF_ERROR) {
        *why = z_.msg ? z_.msg : "zlib error " + std::to_string(r);
        *damaged = r == Z_DATA_ERROR;
        return -1;
      }
    }
    return int64_t(room - z_.avail_out);
  }
  uint64_t offset() const override { return in_->consumed() - z_.avail_in; }

 private:
  std::unique_ptr<FdBytes> in_;
  std::string buf_;
  z_stream z_{};
  bool ok_ = false, in_member_ = false;
  NextMagic next_{"\x1f\x8b"};
};

// Zstandard frames one after another (`cat a.zst b.zst`), skippable frames included; each
// checked by its checksum when it has one (zstd writes it by default).
class ZstdSource final : public TextSource {
 public:
  explicit ZstdSource(std::unique_ptr<FdBytes> in)
      : in_(std::move(in)), buf_(ZSTD_DStreamInSize(), '\0'), z_(ZSTD_createDStream()) {}
  ~ZstdSource() override { ZSTD_freeDStream(z_); }
  int64_t read(char* p, size_t n, std::string* why, bool* damaged) override {
    *damaged = false;
    if (n == 0) return 0;
    if (!z_) {
      *why = "out of memory for libzstd";
      return -1;
    }
    ZSTD_outBuffer out{p, n, 0};
    while (out.pos == 0) {
      if (pos_ == len_) {
        const int64_t got = in_->refill(&buf_, frame_open_, why, damaged);
        if (got <= 0) return got;
        pos_ = 0;
        len_ = size_t(got);
      }
      ZSTD_inBuffer in{buf_.data(), len_, pos_};
      const size_t r = ZSTD_decompressStream(z_, &out, &in);
      pos_ = in.pos;
      if (ZSTD_isError(r)) {
        *why = ZSTD_getErrorName(r);
        *damaged = true;
        return -1;
      }
      frame_open_ = r != 0;  // 0: a frame ended exactly here
    }
    return int64_t(out.pos);
  }
  uint64_t offset() const override { return in_->consumed() - (len_ - pos_); }

 private:
  std::unique_ptr<FdBytes> in_;
  std::string buf_;
  ZSTD_DStream* z_;
  size_t pos_ = 0, len_ = 0;
  bool frame_open_ = false;
};

// bzip2 streams one after another: Wikipedia's "multistream" dumps are thousands of them, as are
// the outputs of pbzip2 and lbzip2. Each block is checked by its CRC-32 (and each stream by its
// combined CRC) inside libbz2. As for gzip, the bytes after a stream must open another ("BZh").
class Bzip2Source final : public TextSource {
 public:
  explicit Bzip2Source(std::unique_ptr<FdBytes> in) : in_(std::move(in)), buf_(1 << 18, '\0') {
    ok_ = BZ2_bzDecompressInit(&z_, 0, 0) == BZ_OK;
  }
  ~Bzip2Source() override {
    if (ok_) BZ2_bzDecompressEnd(&z_);
  }
  int64_t read(char* p, size_t n, std::string* why, bool* damaged) override {
    *damaged = false;
    if (n == 0) return 0;
    if (!ok_) {
      *why = "out of memory for libbz2";
      return -1;
    }
    z_.next_out = p;
    z_.avail_out = unsigned(std::min<size_t>(n, 1u << 30));
    const unsigned room = z_.avail_out;
    while (z_.avail_out == room) {  // until some text comes out, or the end
      if (z_.avail_in == 0) {
        const int64_t got = in_->refill(&buf_, in_stream_, why, damaged);
        if (got <= 0) return got;
        z_.next_in = buf_.data();
        z_.avail_in = unsigned(got);
      }
      if (!next_.check(z_.next_in, z_.avail_in)) {
        *why = "bytes after the end of the bzip2 data that are not another bzip2 stream";
        *damaged = true;
        return -1;
      }
      in_stream_ = true;
      const int r = BZ2_bzDecompress(&z_);
      next_.consumed();
      if (r == BZ_STREAM_END) {
        // libbz2 has no reset: a new state for the next stream, keeping the input pointers.
        char* next_in = z_.next_in;
        const unsigned avail_in = z_.avail_in;
        char* next_out = z_.next_out;
        const unsigned avail_out = z_.avail_out;
        BZ2_bzDecompressEnd(&z_);
        z_ = bz_stream{};
        ok_ = BZ2_bzDecompressInit(&z_, 0, 0) == BZ_OK;
        z_.next_in = next_in;
        z_.avail_in = avail_in;
        z_.next_out = next_out;
        z_.avail_out = avail_out;
        in_stream_ = false;
        next_.expect();
        if (!ok_) {
          *why = "out of memory for libbz2";
          return -1;
        }
      } else if (r != BZ_OK) {
        *damaged = r == BZ_DATA_ERROR || r == BZ_DATA_ERROR_MAGIC;
        *why = r == BZ_DATA_ERROR         ? "bzip2 data error (a block's checksum or contents are wrong)"
               : r == BZ_DATA_ERROR_MAGIC ? "bzip2 data error (not a bzip2 stream header)"
               : r == BZ_MEM_ERROR        ? "out of memory for libbz2"
                                          : "libbz2 error " + std::to_string(r);
        return -1;
      }
    }
    return int64_t(room - z_.avail_out);
  }
  uint64_t offset() const override { return in_->consumed() - z_.avail_in; }

 private:
  std::unique_ptr<FdBytes> in_;
  std::string buf_;
  bz_stream z_{};
  bool ok_ = false, in_stream_ = false;
  NextMagic next_{"BZh"};
};

}  // namespace

void set_read_cancel(const std::atomic<bool>* cancel) { t_read_cancel = cancel; }

Status open_text_source(int fd, const std::string& name, std::unique_ptr<TextSource>* out) {
  auto bytes = std::make_unique<FdBytes>(fd);  // closes fd, whatever happens below
  std::string head(4, '\0');
  size_t have = 0;
  while (have < head.size()) {  // a pipe may hand the first bytes in pieces, or none for a while
    const int64_t got = bytes->read(head.data() + have, head.size() - have);
    if (got < 0) return Status::io_error(name + ": cannot read: " + std::strerror(errno));
    if (got == 0) break;
    have += size_t(got);
  }
  head.resize(have);
  const auto b = [&](size_t i) { return i < head.size() ? uint8_t(head[i]) : 0x100; };
  const bool gzip = b(0) == 0x1f && b(1) == 0x8b;
  const bool zstd = (b(0) == 0x28 && b(1) == 0xb5 && b(2) == 0x2f && b(3) == 0xfd) ||
                    ((b(0) & 0xf0) == 0x50 && b(1) == 0x2a && b(2) == 0x4d && b(3) == 0x18);
  // "BZh" and the block size, '1' to '9'.
  const bool bzip2 = b(0) == 'B' && b(1) == 'Z' && b(2) == 'h' && b(3) >= '1' && b(3) <= '9';
  bytes->unread(std::move(head));
  if (gzip) {
    *out = std::make_unique<GzipSource>(std::move(bytes));
  } else if (zstd) {
    *out = std::make_unique<ZstdSource>(std::move(bytes));
  } else if (bzip2) {
    *out = std::make_unique<Bzip2Source>(std::move(bytes));
  } else {
    *out = std::make_unique<PlainSource>(std::move(bytes));
  }
  return Status::ok();
}

}  // namespace lansbert
