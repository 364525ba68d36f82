// DirLock: a record lock on DIR/.lansbert.lock, with the holder's name inside.
#include "lansbert/core/dir_lock.h"
#include "lansbert/core/host_name.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <ctime>
#include <filesystem>
#include <utility>

namespace lansbert {
namespace {

namespace fs = std::filesystem;

// The whole file (a record line, or empty): what abandon() puts back.
std::string read_all(int fd) {
  std::string s;
  char buf[512];
  for (;;) {
    const ssize_t n = ::pread(fd, buf, sizeof(buf), static_cast<off_t>(s.size()));
    if (n <= 0) return s;
    s.append(buf, static_cast<size_t>(n));
  }
}

// What the lock file says, trimmed to its first line: written by the holder after it took
// the lock, so it may be empty for the instant between the two.
std::string read_record(int fd) {
  std::string s = read_all(fd);
  if (const size_t eol = s.find('\n'); eol != std::string::npos) s.resize(eol);
  return s;
}

bool no_locks_here(int err) { return err == ENOLCK || err == ENOSYS || err == EOPNOTSUPP; }

}  // namespace

DirLock::DirLock(DirLock&& other) noexcept : fd_(std::exchange(other.fd_, -1)) {}

DirLock& DirLock::operator=(DirLock&& other) noexcept {
  if (this != &other) {
    release();
    fd_ = std::exchange(other.fd_, -1);
  }
  return *this;
}

DirLock::~DirLock() { release(); }

void DirLock::release() {
  if (fd_ >= 0) ::close(fd_);  // closing the file releases the record lock
  fd_ = -1;
  previous_.clear();
}

void DirLock::abandon() {
  if (fd_ >= 0 && ::ftruncate(fd_, 0) == 0 && !previous_.empty()) {
    [[maybe_unused]] const ssize_t n = ::pwrite(fd_, previous_.data(), previous_.size(), 0);
  }
  release();
}

std::string DirLock::holder_record(const std::string& program) {
  const std::time_t now = std::time(nullptr);
  std::tm utc{};
  ::gmtime_r(&now, &utc);
  char when[32];
  std::strftime(when, sizeof(when), "%Y-%m-%dT%H:%M:%SZ", &utc);
  return fmt::format("{}, pid {} on {}, since {}", program, static_cast<long>(::getpid()), host_name(), when);
}

Status DirLock::acquire(const std::string& dir, const std::string& field, const std::string& holder,
                        std::string* unlocked_why) {
  release();
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec) return Status::io_error(fmt::format("{} {}: cannot create the directory: {}", field, dir, ec.message()));
  const std::string path = (fs::path(dir) / kFileName).string();
  const int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
  if (fd < 0) return Status::io_error(fmt::format("{} {}: cannot open {}: {}", field, dir, path, std::strerror(errno)));
  struct flock whole {};
  whole.l_type = F_WRLCK;
  whole.l_whence = SEEK_SET;  // l_start 0, l_len 0: the whole file, however long it grows
  if (::fcntl(fd, F_SETLK, &whole) != 0) {
    const int err = errno;
    if (err == EACCES || err == EAGAIN) {
      const std::string who = read_record(fd);
      ::close(fd);
      return Status::invalid_argument(fmt::format(
          "{} {} is in use by another run ({}), and two runs writing one directory overwrite each other's "
          "files: wait for it to end, or give this run another {} (the lock is {}, released when that process "
          "ends)",
          field, dir, who.empty() ? "it has not yet said which" : who, field, path));
    }
    ::close(fd);
    if (!no_locks_here(err))
      return Status::io_error(fmt::format("{} {}: cannot lock {}: {}", field, dir, path, std::strerror(err)));
    if (unlocked_why)
      *unlocked_why = fmt::format("{} {}: this file system offers no record locks ({}), so nothing stops a second "
                                  "run from writing the same directory",
                                  field, dir, std::strerror(err));
    return Status::ok();
  }
  // The record is a courtesy for the message above; a failure to write it costs nothing else.
  previous_ = read_all(fd);
  const std::string line = holder + "\n";
  if (::ftruncate(fd, 0) == 0) {
    [[maybe_unused]] const ssize_t n = ::pwrite(fd, line.data(), line.size(), 0);
  }
  fd_ = fd;
  return Status::ok();
}

}  // namespace lansbert
