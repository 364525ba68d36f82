// checkpoint.async: a replicated checkpoint written by a thread of rank 0 while training goes
// on. The trainer hands it copies of the weights and moments taken at the step boundary (the
// next steps change the live buffers), so the ranks wait only for that copy, not for the file
// system: on the LANS cluster 4 GB through one FSx client, some seconds per checkpoint in
// which 1,536 GPUs would otherwise idle. One write at a time: the next checkpoint, a stop and
// the end of the run wait for the one before, and its outcome is reported then (or at the
// first step boundary after it ends). The write itself is write_checkpoint's: temporary
// directory, fsync, rename, `latest`, prune, so a crash mid-write leaves the previous
// checkpoint and pointer as they were.
#pragma once

#include <atomic>
#include <string>
#include <thread>
#include <vector>

#include "lansbert/core/status.h"
#include "lansbert/model/param_table.h"
#include "lansbert/train/checkpoint.h"

namespace lansbert {

class BackgroundCheckpoint {
 public:
  // Starts writing step meta.step of `table` (params, m and v: full-size, table layout) under
  // root. REQUIRES: table outlives this object.
  BackgroundCheckpoint(std::string root, CheckpointMeta meta, const ParamTable& table, std::vector<float> params,
                       std::vector<float> m, std::vector<float> v, int keep_last);
  // Waits for the write (a run that ends on an error still completes its checkpoint).
  ~BackgroundCheckpoint();
  BackgroundCheckpoint(const BackgroundCheckpoint&) = delete;
  BackgroundCheckpoint& operator=(const BackgroundCheckpoint&) = delete;

  // True once the write is over, ok or not: wait() then returns at once.
  bool finished() const { return finished_.load(std::memory_order_acquire); }
  // Waits for the write; its status (the checkpoint's directory is that of meta.step).
  Status wait();

 private:
  Status status_;
  std::atomic<bool> finished_{false};
  std::thread thread_;  // last: started once the members it writes exist
};

}  // namespace lansbert
