// prep's held-out split (`--heldout-out`, `--heldout-fraction`; prep.h PrepOptions): which
// documents go, how the held-out ones become instances, and how the two output directories
// are opened. Private to src/data.
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include "lansbert/core/status.h"
#include "lansbert/data/instances.h"
#include "lansbert/data/prep.h"
#include "shard_sink.h"

namespace lansbert {

// Moves the held-out documents of `docs` (global indices from first_doc) to *held, keeping
// the order of both sides; *kept_index and *held_index get each side's global indices.
// fraction 0: none.
void split_heldout(double fraction, uint64_t first_doc, std::vector<Document>* docs, std::vector<uint64_t>* kept_index,
                   std::vector<Document>* held, std::vector<uint64_t>* held_index);

// How held-out documents become instances: one pass, masked in the shards whatever
// --dynamic-masking says (data.eval reads static masks); the rest as for training.
InstanceOptions heldout_instance_options(InstanceOptions training);

// The held-out documents, pooled across blocks. A block holds out only its share of its
// documents (one or none at a small fraction, or with long documents such as books), and a
// random sentence B must come from another held-out document, not from A's own under a
// "random" label. So held-out documents are gathered in order, a pool is made into instances
// once it has kDocuments new documents or kTokens new tokens (what it holds then depends on the
// documents alone, not on the block size), and the last kDocuments documents of each pool stay
// on as candidates for the next one's random B. Instances: one pass, masked in the shards.
class HeldoutPool {
 public:
  static constexpr size_t kDocuments = 64;
  static constexpr int64_t kTokens = int64_t(4) << 20;

  // `io`: heldout_instance_options of the training run's.
  HeldoutPool(const InstanceOptions& io, const MaskingVocab& vocab, int threads, ShardSink* sink, PrepStats* stats);
  Status add(Document doc, uint64_t index);
  // Makes the documents added since the last flush into instances.
  Status flush();

 private:
  InstanceOptions io_;
  const MaskingVocab& vocab_;
  int threads_;
  ShardSink* sink_;
  PrepStats* stats_;
  std::vector<Document> docs_;  // the candidates carried over, then the new documents
  std::vector<uint64_t> index_;
  size_t carried_ = 0;
  int64_t new_tokens_ = 0;
  std::vector<Instance> scratch_;
};

// `dir` as an absolute path with symbolic links resolved as far as it exists (a part not yet
// made cannot be one), without a trailing separator: two spellings of one directory compare
// equal, as far as the file system can tell yet.
std::filesystem::path resolved_directory(const std::string& dir);

// The order in which to open (and, reversed, close) the two directories' staging: the outer
// one first when one lies inside the other, so that the directory the inner one's open creates
// is not taken for one that was there before (and is removed again on failure). On
// resolved_directory's paths.
bool heldout_dir_is_outer(const std::string& out_dir, const std::string& heldout_dir);
// invalid_argument when the two name one directory (after --out exists: symlinks, other
// spellings), which check_prep_options cannot see while neither exists.
Status check_distinct_directories(const std::string& out_dir, const std::string& heldout_dir);

}  // namespace lansbert
