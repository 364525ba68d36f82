// TensorBoard event files, written without TensorFlow or protobuf: the training curves that
// Megatron-LM and most PyTorch trainers show in TensorBoard, from logging.tensorboard_dir.
//
// An event file is a sequence of records (TFRecord framing): the data's length as a
// little-endian uint64, the masked CRC32C of those 8 bytes, the data, the masked CRC32C of
// the data. Each record's data is a serialized tensorflow.Event protocol buffer (event.proto,
// summary.proto): wall_time (field 1, double), step (2, int64) and one of file_version (3),
// summary (5: repeated Summary.Value value = 1, each a tag (1) and a simple_value (2, float))
// or session_log (7: status = 1, START = 1). The first record names the version
// "brain.Event:2"; a resumed run's file then holds a SessionLog START at its first step, so
// TensorBoard drops the points a crashed run logged past the checkpoint it resumed from.
#pragma once

#include <cstdint>
#include <cstdio>
#include <string>
#include <utility>
#include <vector>

#include "lansbert/core/status.h"

namespace lansbert {

using TaggedScalars = std::vector<std::pair<std::string, double>>;

// The records, each framed and checksummed, ready to append to an event file.
std::string event_record_file_version(double wall_time);
std::string event_record_session_start(double wall_time, int64_t step);
std::string event_record_scalars(double wall_time, int64_t step, const TaggedScalars& scalars);

// One event file in `dir`, opened (and dir created) on the first write, so a run that fails
// before its first step creates nothing; dir "" writes nothing. Its name,
// events.out.tfevents.SECONDS.HOST.PID.lansbert, is new for every run: a resumed run adds a
// file beside the earlier ones, and TensorBoard reads them as one run.
class EventFile {
 public:
  // `first_step`: the first step this run logs; above 1 (a resume) the file starts with a
  // SessionLog START there.
  EventFile(std::string dir, int64_t first_step) : dir_(std::move(dir)), first_step_(first_step) {}
  ~EventFile();
  EventFile(const EventFile&) = delete;
  EventFile& operator=(const EventFile&) = delete;
  // Appends one record of `scalars` at `step` and flushes it (TensorBoard reads as it grows).
  Status write(int64_t step, const TaggedScalars& scalars);
  const std::string& path() const { return path_; }

 private:
  Status open(double now);
  Status append(const std::string& record);

  std::string dir_;
  int64_t first_step_;
  std::string path_;
  FILE* file_ = nullptr;
};

}  // namespace lansbert
