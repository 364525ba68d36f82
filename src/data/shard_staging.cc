// ShardStaging: a failed prep run must not cost the shards of the last good one.
#include "shard_staging.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <stdlib.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <vector>

#include "lansbert/core/file_io.h"

namespace lansbert {
namespace {

namespace fs = std::filesystem;

constexpr const char* kStagingPrefix = ".prep-staging-";

bool is_shard_name(const std::string& name) { return name.starts_with("shard-") && name.ends_with(".lbs"); }

// Appends the paths in `dir` whose names satisfy `keep` to *out. The whole listing comes
// before any removal: removing entries while reading a directory leaves it unspecified
// which of them are returned.
template <class Keep>
Status list(const std::string& dir, Keep&& keep, std::vector<std::string>* out) {
  std::error_code ec;
  for (fs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
    if (keep(it->path().filename().string())) out->push_back(it->path().string());
  }
  if (ec) return Status::io_error(fmt::format("{}: cannot list: {}", dir, ec.message()));
  return Status::ok();
}

}  // namespace

ShardStaging::~ShardStaging() {
  std::error_code ec;
  if (!staging_.empty()) fs::remove_all(staging_, ec);  // empty after a commit
  if (!committed_) {
    for (const auto& dir : created_) fs::remove(dir, ec);  // deepest first, each only if empty: never others' files
  }
  if (lock_fd_ >= 0) ::close(lock_fd_);  // releases the lock
}

void ShardStaging::release_to_holder() {
  // The run holding the lock may have found out_dir and its ancestors made by us (mkdir
  // raced): those are its now. Other levels we made ("made/.." in the path) are still ours.
  std::error_code ec;
  const fs::path out = fs::canonical(out_dir_, ec);
  if (ec) return created_.clear();
  std::erase_if(created_, [&out](const fs::path& dir) {
    std::error_code dir_ec;
    const fs::path real = fs::canonical(dir, dir_ec);
    if (dir_ec) return true;  // not ours to judge: leave it
    return std::mismatch(real.begin(), real.end(), out.begin(), out.end()).first == real.end();
  });
}

Status ShardStaging::open(const std::string& out_dir, const std::string& option) {
  out_dir_ = out_dir;
  std::error_code ec;
  // out_dir and its missing parents, shallowest first, one mkdir each: a level is ours (to
  // remove again after a failure) only when our mkdir made it. Guessing from exists() beforehand
  // took a dangling symbolic link, or an existing directory reached through "missing/..", for
  // ours. A level mkdir refuses is fine when it is a directory already, whatever the refusal
  // said (NFS and autofs may answer EACCES for an existing one).
  fs::path level;
  for (const fs::path& part : fs::path(out_dir)) {
    level /= part;
    if (::mkdir(level.c_str(), 0777) == 0) {
      created_.insert(created_.begin(), level);  // deepest first
      continue;
    }
    const int refused = errno;
    struct stat st {};
    const bool found = ::stat(level.c_str(), &st) == 0;
    if (found && S_ISDIR(st.st_mode)) continue;  // there already: not ours
    const int stat_errno = errno;
    std::string why = std::strerror(refused);
    if (found) {
      why = "it is not a directory";
    } else if (::lstat(level.c_str(), &st) == 0 && S_ISLNK(st.st_mode)) {
      why = stat_errno == ENOENT ? std::string("a symbolic link to nothing is in the way")
                                 : "a symbolic link is in the way: " + std::string(std::strerror(stat_errno));
    }
    return Status::io_error(fmt::format("{} {}: cannot create the directory {}: {}", option, out_dir, level.string(), why));
  }
  // The lock is on the directory itself, so it leaves no file behind.
  lock_fd_ = ::open(out_dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (lock_fd_ < 0) {
    return Status::io_error(fmt::format("{} {}: cannot open: {}", option, out_dir, std::strerror(errno)));
  }
  if (::flock(lock_fd_, LOCK_EX | LOCK_NB) != 0) {
    if (errno == EWOULDBLOCK) {  // a usage error (exit 2, as train's checkpoint.dir lock), not a failed I/O
      release_to_holder();
      return Status::invalid_argument(
          fmt::format("{} {}: another lansbert prep or convert is writing to this directory", option, out_dir));
    }
    ::close(lock_fd_);  // no locks here (NFS makes flock a POSIX lock, refused on a read-only fd)
    lock_fd_ = -1;
  }
  std::vector<std::string> stale_dirs;
  LB_RETURN_IF_ERROR(list(out_dir, [](const std::string& name) { return name.starts_with(kStagingPrefix); }, &stale_dirs));
  for (const auto& stale : stale_dirs) {
    if (lock_fd_ >= 0) {
      fs::remove_all(stale, ec);  // a crashed run's: a live one would hold the lock
    } else {
      std::fprintf(stderr, "note: %s is probably left by an interrupted run; delete it when no prep or convert "
                   "writes to %s\n", stale.c_str(), out_dir.c_str());
    }
  }
  std::string templ = (fs::path(out_dir) / (std::string(kStagingPrefix) + "XXXXXX")).string();
  if (::mkdtemp(templ.data()) == nullptr) {
    return Status::io_error(
        fmt::format("{} {}: cannot create a staging directory: {}", option, out_dir, std::strerror(errno)));
  }
  staging_ = templ;
  return Status::ok();
}

Status ShardStaging::commit(int64_t shards) {
  std::vector<std::string> fresh;
  LB_RETURN_IF_ERROR(list(staging_, is_shard_name, &fresh));
  if (static_cast<int64_t>(fresh.size()) != shards) {  // check before the old shards go
    return Status::internal(fmt::format("{}: holds {} shards, the run wrote {}", staging_, fresh.size(), shards));
  }
  for (auto& path : fresh) path = fs::path(path).filename().string();
  std::sort(fresh.begin(), fresh.end());
  for (const auto& name : fresh) {
    const std::string from = (fs::path(staging_) / name).string(), to = (fs::path(out_dir_) / name).string();
    if (::rename(from.c_str(), to.c_str()) != 0) {
      return Status::io_error(fmt::format("cannot move {} to {}: {}", from, to, std::strerror(errno)));
    }
  }
  committed_ = true;  // from here on out_dir holds the new run
  const auto stale = [&](const std::string& name) {
    return (is_shard_name(name) && !std::binary_search(fresh.begin(), fresh.end(), name)) ||
           (name.starts_with("shard-") && name.ends_with(".lbs.tmp"));
  };
  std::vector<std::string> old;
  LB_RETURN_IF_ERROR(list(out_dir_, stale, &old));
  std::error_code ec;
  for (const auto& path : old) {
    fs::remove(path, ec);
    if (ec) return Status::io_error(fmt::format("{}: cannot remove an earlier run's shard: {}", path, ec.message()));
  }
  return fsync_directory(out_dir_);
}

}  // namespace lansbert
