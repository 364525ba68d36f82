// Shards: our binary pretraining-data file and the reader interface the loader uses for
// both it and NVIDIA's HDF5 files (hdf5_shard.h). Our format (docs/data-format.md) is a
// 256-byte versioned header with a CRC32C, then fixed-size records, each ending in its own
// CRC32C, so record i is at a computed offset (O(1) random access through mmap) and a
// read checks exactly the bytes it copies. The writer writes a temporary file, fsyncs and
// renames, so a crash never leaves a half-written shard under the final name.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>

#include "lansbert/core/status.h"
#include "lansbert/data/instances.h"
#include "lansbert/model/batch.h"

namespace lansbert {

class Vocab;

// Abstract access to one file of pretraining instances.
class ShardReader {
 public:
  virtual ~ShardReader() = default;
  virtual const std::string& path() const = 0;
  virtual int64_t count() const = 0;
  virtual int seq_len() const = 0;
  virtual int max_pred() const = 0;
  // True when the records are stored unmasked and must be masked at load time.
  virtual bool dynamic_masking() const { return false; }
  // Fills row `row` of `batch` (already sized with this seq_len/max_pred) with record
  // `index`. A record that fails its checksum is a corrupt Status naming file and offset.
  virtual Status read(int64_t index, Batch* batch, int row) = 0;
};

// Version 2 stores token ids in 2 bytes when the vocab has at most 65,536 entries (BERT's
// 30,522: records of 348 instead of 644 bytes at 128/20); version 1 (always 4) still reads.
inline constexpr uint32_t kShardVersion = 2;
inline constexpr uint32_t kShardOldestVersion = 1;
inline constexpr char kShardMagic[8] = {'L', 'B', 'S', 'H', 'A', 'R', 'D', '\0'};

// The creation parameters and vocabulary identity a shard records.
struct ShardInfo {
  int seq_len = 128;
  int max_pred = 20;
  int32_t vocab_size = 0;
  uint64_t vocab_hash = 0;
  int32_t cls_id = 101, sep_id = 102, mask_id = 103;
  uint64_t seed = 0;
  int dupe_factor = 0;
  float masked_lm_prob = 0.15f;
  float short_seq_prob = 0.1f;
  bool whole_word = false;
  bool dynamic_masking = false;
  int64_t record_count = 0;  // filled by the writer / reader
  int id_bytes = 4;          // filled by the writer (shard_id_bytes) / reader: 2 or 4
};

// A ShardInfo with `vocab`'s identity (size, hash, [CLS]/[SEP]/[MASK] ids) and the other
// fields at their defaults: what prep and convert start from.
ShardInfo shard_info_of(const Vocab& vocab);

// Bytes per stored token id for a vocab of `vocab_size` entries: 2 up to 65,536, else 4.
int shard_id_bytes(int32_t vocab_size);
// Bytes per record for (seq_len, max_pred) with ids of `id_bytes`: ids, lengths, masked slots
// and the CRC.
int64_t shard_record_size(int seq_len, int max_pred, int id_bytes);
// The shapes lansbert writes and reads, ours and NVIDIA's HDF5 alike: 4 <= S <= 65535 token
// positions, 1 to S masked slots (with none there is nothing for the masked-LM loss).
constexpr bool shard_shape_ok(uint64_t seq_len, uint64_t max_pred) {
  return seq_len >= 4 && seq_len <= 65535 && max_pred >= 1 && max_pred <= seq_len;
}

class ShardWriter {
 public:
  ~ShardWriter();  // an unfinished writer removes its temporary file
  // Opens `<path>.tmp` for writing records with `info`'s parameters.
  static Status create(const std::string& path, const ShardInfo& info,
                       std::unique_ptr<ShardWriter>* out);
  // REQUIRES: inst fits (tokens <= seq_len, masked <= max_pred).
  Status add(const Instance& inst);
  // Writes the header, fsyncs, renames to the final path and fsyncs the directory.
  Status finish();
  int64_t count() const { return info_.record_count; }

 private:
  ShardWriter() = default;
  Status flush();
  std::string path_, tmp_path_;
  ShardInfo info_;
  int fd_ = -1;
  std::string buf_;
  int64_t record_size_ = 0;
};

class LbShardReader final : public ShardReader {
 public:
  ~LbShardReader() override;
  // Opens and validates `path`: magic, version, header CRC, id width, record size, file
  // size. The vocabulary a run expects is ShardSet::open's check (it names the vocab file).
  static Status open(const std::string& path, std::unique_ptr<LbShardReader>* out);

  const std::string& path() const override { return path_; }
  int64_t count() const override { return info_.record_count; }
  int seq_len() const override { return info_.seq_len; }
  int max_pred() const override { return info_.max_pred; }
  bool dynamic_masking() const override { return info_.dynamic_masking; }
  Status read(int64_t index, Batch* batch, int row) override;
  // Checks every record's CRC (a full scan; the tests use it on what prep and convert wrote).
  Status verify_all() const;
  const ShardInfo& info() const { return info_; }

 private:
  LbShardReader() = default;
  // Copies record `index` out of the mapping (a file shrunk under the run is an I/O error
  // naming it, not a SIGBUS) and checks its CRC; *record points at the copy, valid until this
  // thread's next call.
  Status check_record(int64_t index, const uint8_t** record) const;
  std::string path_;
  ShardInfo info_;
  const uint8_t* map_ = nullptr;
  size_t map_size_ = 0;
  int64_t record_size_ = 0;
};

}  // namespace lansbert
