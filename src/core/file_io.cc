// read_file / write_file_atomic over POSIX calls, so that fsync and rename are explicit.
#include "lansbert/core/file_io.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <vector>

namespace lansbert {

namespace {
std::string errno_text() { return std::strerror(errno); }
}  // namespace

namespace {
// Opens `path` for reading; it must be a regular file. Errors name the path.
Status open_regular_file(const std::string& path, int* fd, size_t* size) {
  *fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (*fd < 0) {
    if (errno == ENOENT) return Status::not_found(path + ": no such file");
    return Status::io_error(path + ": cannot open: " + errno_text());
  }
  struct stat st {};
  if (::fstat(*fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    ::close(*fd);
    return Status::io_error(path + ": not a regular file");
  }
  *size = static_cast<size_t>(st.st_size);
  return Status::ok();
}

// Fills [buf, buf + n) from fd at its current offset; `done` is where in the file buf starts.
Status read_fully(int fd, const std::string& path, char* buf, size_t n, size_t done) {
  for (size_t got = 0; got < n;) {
    const ssize_t r = ::read(fd, buf + got, n - got);
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0)
      return Status::io_error(path + ": read failed at byte " + std::to_string(done + got) + ": " +
                              (r == 0 ? std::string("unexpected end of file") : errno_text()));
    got += static_cast<size_t>(r);
  }
  return Status::ok();
}
}  // namespace

Status read_file(const std::string& path, std::string* out) {
  int fd = -1;
  size_t size = 0;
  LB_RETURN_IF_ERROR(open_regular_file(path, &fd, &size));
  out->resize(size);
  const Status st = read_fully(fd, path, out->data(), size, 0);
  ::close(fd);
  return st;
}

Status read_file_in_chunks(const std::string& path, size_t chunk_bytes,
                           const std::function<void(const char*, size_t)>& consume, size_t* total) {
  int fd = -1;
  size_t size = 0;
  LB_RETURN_IF_ERROR(open_regular_file(path, &fd, &size));
  std::vector<char> buf(std::min(std::max<size_t>(chunk_bytes, 1), std::max<size_t>(size, 1)));
  Status st;
  for (size_t done = 0; done < size && st.is_ok();) {
    const size_t n = std::min(buf.size(), size - done);
    st = read_fully(fd, path, buf.data(), n, done);
    if (st.is_ok()) consume(buf.data(), n);
    done += n;
  }
  ::close(fd);
  if (st.is_ok()) *total = size;
  return st;
}

Status create_parent_directories(const std::string& path, const std::string& field) {
  const std::filesystem::path parent = std::filesystem::path(path).parent_path();
  std::error_code ec;
  if (!parent.empty()) std::filesystem::create_directories(parent, ec);
  if (ec) return Status::io_error(field + ": " + path + ": cannot create " + parent.string() + ": " + ec.message());
  return Status::ok();
}

Status fsync_directory(const std::string& dir) {
  const int fd = ::open(dir.empty() ? "." : dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) return Status::io_error(dir + ": cannot open directory: " + errno_text());
  const int rc = ::fsync(fd);
  ::close(fd);
  if (rc != 0) return Status::io_error(dir + ": fsync failed: " + errno_text());
  return Status::ok();
}

Status write_file_atomic(const std::string& path, const std::vector<std::string_view>& parts) {
  const std::filesystem::path target(path);
  const std::string dir = target.parent_path().string();
  const std::string tmp = path + ".tmp." + std::to_string(::getpid());
  const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) return Status::io_error(tmp + ": cannot create: " + errno_text());
  for (std::string_view part : parts) {
    size_t done = 0;
    while (done < part.size()) {
      const ssize_t n = ::write(fd, part.data() + done, part.size() - done);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) {
        const std::string why = errno_text();
        ::close(fd);
        ::unlink(tmp.c_str());
        return Status::io_error(tmp + ": write failed: " + why);
      }
      done += static_cast<size_t>(n);
    }
  }
  if (::fsync(fd) != 0) {
    const std::string why = errno_text();
    ::close(fd);
    ::unlink(tmp.c_str());
    return Status::io_error(tmp + ": fsync failed: " + why);
  }
  ::close(fd);
  if (::rename(tmp.c_str(), path.c_str()) != 0) {
    const std::string why = errno_text();
    ::unlink(tmp.c_str());
    return Status::io_error(path + ": rename from " + tmp + " failed: " + why);
  }
  return fsync_directory(dir);
}

bool free_bytes_under(const std::string& path, uint64_t* free_bytes) {
  namespace fs = std::filesystem;
  std::error_code ec;
  fs::path p = fs::absolute(path, ec);
  while (!p.empty() && !fs::exists(p, ec) && p != p.root_path()) p = p.parent_path();
  struct statvfs st {};
  if (p.empty() || ::statvfs(p.c_str(), &st) != 0) return false;
  *free_bytes = uint64_t(st.f_bavail) * uint64_t(st.f_frsize);
  return true;
}

Status check_can_create(const std::string& path, PathKind kind, const std::string& field) {
  namespace fs = std::filesystem;
  if (path.empty()) return Status::invalid_argument(field + ": an empty path");
  const std::string what = field + ": " + path;
  std::error_code ec;
  const fs::file_status st = fs::status(path, ec);
  if (fs::exists(st)) {
    if (kind == PathKind::kDirectory && !fs::is_directory(st)) return Status::invalid_argument(what + " exists and is not a directory");
    if (kind == PathKind::kFile && !fs::is_regular_file(st)) return Status::invalid_argument(what + " exists and is not a regular file");
    if (::access(path.c_str(), kind == PathKind::kDirectory ? W_OK | X_OK : W_OK) != 0)
      return Status::io_error(what + " is not writable: " + errno_text());
    return Status::ok();
  }
  // Not there yet: it will be created (with its missing parents) under the nearest existing
  // ancestor. Creating and removing the first missing component there is the one test that
  // also holds for root and for special file systems (access() says yes to root, even in /proc).
  const fs::path target = fs::absolute(path, ec);
  fs::path first = target, up = target.parent_path();
  while (!up.empty() && up != up.root_path() && !fs::exists(up, ec)) {
    first = up;
    up = up.parent_path();
  }
  if (!fs::is_directory(up, ec))
    return Status::invalid_argument(what + ": cannot be created, " + up.string() + " is not a directory");
  const bool file = kind == PathKind::kFile && first == target;
  const int fd = file ? ::open(first.c_str(), O_CREAT | O_EXCL | O_WRONLY | O_CLOEXEC, 0644) : -1;
  if (file ? fd < 0 : ::mkdir(first.c_str(), 0755) != 0)
    return Status::io_error(what + ": cannot be created in " + up.string() + ": " + errno_text());
  if (file) {
    ::close(fd);
    ::unlink(first.c_str());
  } else {
    ::rmdir(first.c_str());
  }
  return Status::ok();
}

}  // namespace lansbert
