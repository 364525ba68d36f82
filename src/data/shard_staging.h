// ShardStaging: where `lansbert prep` writes its shards until the run has succeeded. The
// new shards go to a fresh hidden directory inside --out (same file system, so moving them
// is a rename); commit() moves them over the old ones and removes the old shards the new
// run did not replace. A run that fails or is interrupted before commit() leaves --out as
// it was: its shards are untouched, only the staging directory was added (removed by the
// destructor, or by the next run after a crash).
//
// A lock on the --out directory (flock, released by the kernel when the process dies)
// keeps two runs from staging and committing into it at once; holding it, a run knows that
// any other staging directory there is a crashed run's and removes it. Where the file
// system has no such locks (NFS), the run goes on unlocked and only names stale ones.
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include "lansbert/core/status.h"

namespace lansbert {

class ShardStaging {
 public:
  ShardStaging() = default;
  ShardStaging(const ShardStaging&) = delete;
  ShardStaging& operator=(const ShardStaging&) = delete;
  // Without a successful commit(): removes the staging directory, and --out and the parents
  // open() created for it (each only if nothing else has appeared in it).
  ~ShardStaging();

  // Creates out_dir when missing, takes the lock and makes the staging directory. `option`
  // names out_dir in errors.
  Status open(const std::string& out_dir, const std::string& option = "--out");
  // The directory to write the new shard-NNNNN.lbs files into.
  const std::string& dir() const { return staging_; }
  // Checks that the staging directory holds the `shards` files the run wrote, renames each
  // into out_dir (replacing a file of the same name in one step), then removes out_dir's
  // other shard-*.lbs and shard-*.lbs.tmp (an earlier, longer run's) and fsyncs out_dir;
  // the destructor removes the emptied staging directory. A crash inside commit() can
  // leave new shards next to old ones of higher numbers; it is a sequence of renames, so
  // that window is short.
  Status commit(int64_t shards);

 private:
  std::string out_dir_, staging_;
  int lock_fd_ = -1;
  // After a refused lock: forgets the made levels that are out_dir or its ancestors.
  void release_to_holder();

  std::vector<std::filesystem::path> created_;  // by open(), deepest first
  bool committed_ = false;
};

}  // namespace lansbert
