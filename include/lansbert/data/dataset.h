// ShardSet: all shard files of a run behind one global sample index [0, N), in the order of
// their sorted paths, whatever their format (ours or NVIDIA's HDF5, told apart by magic).
// The sampler permutes this index; the loader reads through it.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "lansbert/data/shard.h"

namespace lansbert {

// Which files a set may hold (the trainer's data.format): any by magic, or only one kind.
enum class ShardFormat { kAny, kLbs, kHdf5 };

struct ShardSetOptions {
  // When set, each of our shards must have been made with this vocab (HDF5 files carry no
  // vocab identity and are not checked).
  std::optional<uint64_t> vocab_hash;
  // Where vocab_hash came from, for the mismatch message ("data.vocab /data/vocab.txt").
  std::string vocab_source;
  // NVIDIA's rule for its training files: keep only files whose name contains "training".
  bool training_only = false;
  // A file of another kind than this is an error naming it (not skipped: a glob that picks
  // up the wrong files is the user's to fix).
  ShardFormat format = ShardFormat::kAny;
  // > 0: every token id read (inputs and masked originals) must be below it: the model's
  // vocab_size. Our shards' ids must also be below their header's vocab size; HDF5 files
  // record none, so only this bound checks theirs.
  int32_t token_limit = 0;
  // What token_limit is, for an id past it (default: "the vocabulary").
  std::string token_limit_source;
  // Every segment id read must be below it: the model's token types (type_vocab; BERT's 2).
  // Our shards store sentence A's end, so only HDF5 files can hold others.
  int32_t segment_limit = 2;
};

class ShardSet {
 public:
  // Expands each pattern with glob(3) (a plain directory means all files in it), sorts the
  // paths, keeps one path per file (the first; files compared by device and inode), and
  // opens every file. All files must agree on seq_len,
  // max_pred and masking mode. No file is an error naming the patterns.
  static Status open(const std::vector<std::string>& patterns, const ShardSetOptions& opts,
                     std::unique_ptr<ShardSet>* out);
  // Sources of a blend (data.weights): each source's files as open finds them, the sources
  // one after another in the global index (source 0's samples first). A file in two sources
  // is an error naming both as name[i] (the trainer's "data.train").
  static Status open_sources(const std::vector<std::vector<std::string>>& sources, const ShardSetOptions& opts,
                             std::unique_ptr<ShardSet>* out, const std::string& name = "source");

  int64_t count() const { return offsets_.back(); }
  int seq_len() const { return shards_.front()->seq_len(); }
  int max_pred() const { return shards_.front()->max_pred(); }
  bool dynamic_masking() const { return shards_.front()->dynamic_masking(); }
  size_t num_shards() const { return shards_.size(); }
  // Samples of each source (open_sources; a set opened by open is one source).
  const std::vector<int64_t>& source_sizes() const { return source_sizes_; }
  ShardReader& shard(size_t i) { return *shards_[i]; }
  // Parameters of the first of our shards (nullopt for an HDF5-only set): dynamic masking
  // takes its probability, special ids and vocab size from here.
  const std::optional<ShardInfo>& info() const { return info_; }
  // Whether every shard is one of lansbert's made with --whole-word (an HDF5 one records no
  // masking mode, so it counts as not): what data.whole_word asks of statically masked shards.
  bool all_whole_word() const { return all_whole_word_; }

  // Fills row `row` of `batch` with global sample `index`, and checks its fields: token ids
  // within the vocabulary, masked positions within the sequence, NSP label 0 or 1. Out of
  // range is a corrupt Status naming the file, the sample and the field (a checksum only
  // proves a record is as written, not that its writer was right).
  Status read(int64_t index, Batch* batch, int row);
  // Global sample `index` as read's errors name it: "<file>: sample <index in that file>".
  std::string where(int64_t index) const;

  // The CRC32C of three samples (the first, the middle and the last, as read): shards made
  // from other text, or with another seed or masking, differ here even where their counts
  // agree. Ranks compare it to make sure they read the same data.
  Status sample_digest(uint32_t* out);
  // The same of the samples [begin, end) alone (0 when empty).
  Status sample_digest(int64_t begin, int64_t end, uint32_t* out);
  // Each source's sample_digest: which source is which, wherever its files moved.
  Status source_digests(std::vector<uint32_t>* out);

 private:
  size_t shard_of(int64_t index) const;  // the shard holding global sample `index`
  Status check_row(const ShardReader& shard, int64_t local, const Batch& batch, int row) const;

  std::vector<std::unique_ptr<ShardReader>> shards_;
  std::vector<int64_t> offsets_{0};  // offsets_[i] = first global index of shard i
  std::vector<int64_t> source_sizes_;
  std::optional<ShardInfo> info_;
  bool all_whole_word_ = true;
  int32_t segment_limit_ = 2;          // ShardSetOptions::segment_limit
  std::string token_limit_note_ = " (the vocabulary)";  // after an id past token_limit_
  int32_t token_limit_ = INT32_MAX;  // ids must be below this (ShardSetOptions::token_limit, our headers)
};

// Opens one file by its magic: ours ("LBSHARD") or HDF5; with a format other than kAny, a
// file of the other kind is refused by name before it is opened.
// Our shards' vocabulary is not checked here: ShardSet::open compares it (naming the source).
Status open_shard(const std::string& path, std::unique_ptr<ShardReader>* out, ShardFormat format = ShardFormat::kAny);

}  // namespace lansbert
