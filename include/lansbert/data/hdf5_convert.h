// convert_hdf5_shards: NVIDIA DeepLearningExamples' HDF5 pretraining shards rewritten as
// lansbert shards (`lansbert convert`), so a run reads them through mmap, one checked record
// at a time, instead of decoding every file it touches into memory and keeping it there
// (with a global sample order every file is touched each epoch: about 1.3 KB a sample at
// 128/20 held per rank). One .lbs file per HDF5 file, statically masked, reading back as
// exactly the same samples; a sample the .lbs record cannot hold exactly is refused.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "lansbert/core/status.h"
#include "lansbert/data/instances.h"
#include "lansbert/data/shard.h"
#include "lansbert/model/batch.h"

namespace lansbert {

// Row `row` of `b` (an unpacked batch as ShardReader::read fills it) as a lansbert record.
// The record stores a sequence as its first n tokens, sentence A up to its first [SEP] and
// B after it, so it holds exactly the rows whose input_mask is n ones then zeros, whose
// segment_ids are 0s then 1s within those n (0 after), whose padding ids are 0 and whose
// masked slots are filled from the first; any other row is invalid_argument saying which
// field and position break that (the caller names the file and sample).
Status batch_row_to_instance(const Batch& b, int row, Instance* out);

struct Hdf5ConvertStats {
  int64_t files = 0;
  int64_t samples = 0;
  uint64_t bytes_written = 0;
};

struct Hdf5ConvertOptions {
  std::vector<std::string> inputs;  // files, globs or directories, as data.train takes them
  std::string out_dir;              // shard-NNNNN.lbs, one per input file in sorted order
  // The vocabulary the ids mean (the shards record it; HDF5 files do not): its size, hash and
  // special ids go into each header, and every id must be below its size.
  ShardInfo vocab;
  std::string vocab_path;  // where `vocab` came from (--vocab), for the message of an id past it
  // Polled between samples: non-zero (a signal number) stops the conversion with out_dir as
  // it was (kInterrupted).
  std::function<int()> stop;
  // Called after each file with its path, the shard written and its sample count.
  std::function<void(const std::string&, const std::string&, int64_t)> on_file;
};

// Converts every input file (each must be HDF5) into out_dir through a staging directory:
// on any error out_dir is left as it was; on success its earlier shard-*.lbs files are
// replaced, as `lansbert prep` does. Each file's decoded arrays are freed once converted.
Status convert_hdf5_shards(const Hdf5ConvertOptions& opts, Hdf5ConvertStats* stats);

}  // namespace lansbert
