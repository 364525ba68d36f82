// DirLock: one writer at a time for an output directory that outlives a run, such as a
// training run's checkpoint.dir. Two runs writing one checkpoint directory (a job started
// twice, a requeued Slurm job whose first attempt still runs) would overwrite each other's
// checkpoints, `latest` pointer and metrics, and a later --resume would continue whichever
// wrote last, silently.
//
// The lock is a POSIX record lock (fcntl F_SETLK) on DIR/.lansbert.lock rather than flock:
// NFS (through its lock manager) and Lustre honour record locks across hosts, which is
// where a cluster keeps its checkpoints. The kernel or the lock manager releases it when
// the process dies, so a crash leaves no stale lock; the file itself stays (unlinking it
// would let a third run lock a new file while a second holds the old one). The holder
// writes who it is into the file as soon as it holds the lock, so a refused run can name
// it; a holder that turns out to be refused itself puts the earlier record back. Record
// locks belong to the process: they never conflict within one, and closing any descriptor
// of the file drops them, so nothing else in the process opens the lock file.
#pragma once

#include <string>

#include "lansbert/core/status.h"

namespace lansbert {

class DirLock {
 public:
  static constexpr const char* kFileName = ".lansbert.lock";

  DirLock() = default;
  DirLock(const DirLock&) = delete;
  DirLock& operator=(const DirLock&) = delete;
  DirLock(DirLock&& other) noexcept;
  DirLock& operator=(DirLock&& other) noexcept;
  ~DirLock();  // releases the lock

  // Creates `dir` when missing and takes the lock, recording `holder` (for example
  // "lansbert train, pid 4711 on node-3, since 2026-12-05T14:30:00Z") in the file. A lock
  // held by another process is an invalid-argument error that names `field` (the config key
  // or flag that chose `dir`), the directory and the holder's record. Where the file system
  // offers no record locks (ENOLCK, ENOSYS, EOPNOTSUPP) the run goes on unlocked:
  // *unlocked_why (when given) says so, and held() is false.
  Status acquire(const std::string& dir, const std::string& field, const std::string& holder,
                 std::string* unlocked_why = nullptr);
  bool held() const { return fd_ >= 0; }
  void release();
  // For a run refused after it took the lock: puts back the record the file held before
  // acquire() (a refused run must not leave its pid there, nor change the directory), then
  // releases.
  void abandon();

  // "PROGRAM, pid P on HOST, since UTC-TIME": this process's record for the lock file.
  static std::string holder_record(const std::string& program);

 private:
  int fd_ = -1;
  std::string previous_;  // the file's content before acquire() wrote this holder's record
};

}  // namespace lansbert
