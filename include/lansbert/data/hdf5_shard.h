// NVIDIA DeepLearningExamples' HDF5 pretraining shards (docs/data-format.md), read unchanged through the
// ShardReader interface so users can train on the files they already hold. Opening checks
// that the six datasets exist with consistent shapes; the first read decodes the whole
// file into memory (the datasets are gzip-chunked, so single-row reads would inflate a
// chunk per sample), as NVIDIA's own loader does; `lansbert convert` (hdf5_convert.h) makes
// lansbert shards of them for runs that cannot hold every decoded file.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "lansbert/data/shard.h"

namespace lansbert {

class Hdf5ShardReader final : public ShardReader {
 public:
  static Status open(const std::string& path, std::unique_ptr<Hdf5ShardReader>* out);

  const std::string& path() const override { return path_; }
  int64_t count() const override { return count_; }
  int seq_len() const override { return seq_len_; }
  int max_pred() const override { return max_pred_; }
  // Not thread-safe (the first call loads the file); the loader reads from one thread.
  Status read(int64_t index, Batch* batch, int row) override;
  // Frees the decoded arrays; the next read loads them again (convert: one file at a time).
  void release();

 private:
  Hdf5ShardReader() = default;
  Status load();
  std::string path_;
  int64_t count_ = 0;
  int seq_len_ = 0, max_pred_ = 0;
  bool loaded_ = false;
  std::vector<int32_t> input_ids_, positions_, masked_ids_;
  std::vector<int8_t> input_mask_, segment_ids_, nsp_;
};

}  // namespace lansbert
