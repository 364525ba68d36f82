// run_prep: raw text to our shards, the engine of `lansbert prep`. Streams the input in
// blocks of about `block_bytes` of text: a block's sentences are tokenized in parallel,
// its documents become instances pass by pass (random sentence B comes from the same
// block), and instances go to shards of `shard_size` records as they are made. Memory is
// bounded by the block, not the corpus. The output depends on the seed and the block size
// only, never on the thread count. The tokenizer is a callback so that this layer needs
// no particular tokenizer (the CLI passes BertTokenizer; tests pass a fake).
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "lansbert/core/status.h"
#include "lansbert/data/corpus_file.h"
#include "lansbert/data/instances.h"
#include "lansbert/data/shard.h"

namespace lansbert {

// Upper bounds of prep's options. Threads: more than this gains nothing (the output does
// not depend on the count) and libgomp puts per-thread start data on the caller's stack, so
// a huge team overflows it (100000 threads crashed with SIGSEGV). Block: text per block;
// memory is about 5 to 10 times this. Dupe passes: the pass gets 18 bits of the random
// streams' key (instances.cc document_key).
inline constexpr int kMaxPrepThreads = 1024;
inline constexpr size_t kMaxPrepBlockBytes = size_t(64) << 30;
inline constexpr int kMaxDupeFactor = 1 << 18;

struct PrepOptions {
  std::vector<std::string> inputs;
  CorpusOptions corpus;             // text or JSON Lines, plain or compressed (corpus_file.h)
  std::string out_dir;
  InstanceOptions instances;
  int64_t shard_size = 262144;      // records per shard file
  size_t block_bytes = 16u << 20;   // text per block
  int threads = 0;                  // 0 = OpenMP's default
  bool progress = false;            // a progress line on stderr
  // Polled between documents and between steps of a block, from two threads at once (the
  // next block is read while one is made): it must be thread-safe and must not wait for the
  // caller (the reader's teardown waits for a call in progress). A non-zero signal number ends
  // the run with Status::interrupted and out_dir as it was (`lansbert prep`: stop_signal(), an
  // atomic). A read waiting on a pipe sees core/stop_signals.h's stop_signal() itself.
  std::function<int()> stop;
  // A held-out set (`--heldout-out`, `--heldout-fraction`): each document whose token hash
  // (heldout_document) falls below heldout_fraction goes, whole, to heldout_dir instead of
  // out_dir, made into instances once (pass 0) and masked there whatever dynamic_masking says,
  // as `data.eval` wants; its random sentences B come from other held-out documents only, so
  // no held-out text is ever in a training instance. Empty heldout_dir: no split.
  std::string heldout_dir;
  double heldout_fraction = 0.01;
  // `--dedup`: a document whose document_hash an earlier document of the run had (the same
  // tokens and sentence boundaries: the same text up to whitespace, and case when uncased) is
  // dropped before anything else sees it, as if the input had not held it. The set of hashes
  // grows with the distinct documents (16 to 32 bytes each: seen_documents.h).
  bool dedup = false;
  // `--near-dedup J` (0: off): a document whose 5-token shingles have an estimated Jaccard
  // similarity of about J or more to a kept earlier document's is dropped, after --dedup and
  // before anything else sees it (MinHash with LSH: src/data/near_duplicates.h). J in [0.5, 0.99].
  double near_dedup = 0;
};

// Whether `doc` belongs to the held-out share `fraction`: a 64-bit hash of its token ids and
// sentence lengths, read as a number in [0, 1), is below it. It depends on the text alone
// (not the seed, the file, its place in the corpus or the block size), so phase 1 and phase 2
// shards made from one corpus hold out the same documents, a smaller fraction holds out a
// subset of a larger one's, and exact duplicates of a document fall on its side.
uint64_t document_hash(const Document& doc);
bool heldout_document(const Document& doc, double fraction);

// Appends the WordPiece ids of one sentence. Must be safe to call from several threads.
using TokenizeFn = std::function<Status(std::string_view text, std::vector<int32_t>* ids)>;

struct PrepStats {
  uint64_t bytes = 0;
  int64_t documents = 0, sentences = 0, tokens = 0, instances = 0, shards = 0;
  int64_t duplicates = 0;  // documents --dedup dropped (not in the counts above)
  int64_t near_duplicates = 0;  // documents --near-dedup dropped (nor these)
  int near_dedup_bands = 0, near_dedup_rows = 0;  // its LSH geometry
  size_t near_dedup_bytes = 0;  // its band tables' memory at the end
  // Documents of one sentence: each of their instances takes a random sentence B, so a corpus
  // of mostly these (one sentence per record, or a blank line after every sentence) teaches
  // next-sentence prediction nothing.
  int64_t single_sentence_documents = 0;
  // Tokens the instances hold ([CLS] and [SEP] included), of instances x seq_len positions:
  // the rest is padding, which training computes on as on tokens.
  int64_t instance_tokens = 0;
  // With a held-out set, documents, sentences and tokens count both sides, the rest the
  // training side; the held-out set's own counts:
  int64_t heldout_documents = 0, heldout_instances = 0, heldout_instance_tokens = 0, heldout_shards = 0;
  double seconds = 0;
};

// Checks every option and input of a run without touching the file system: numeric ranges
// (the error names the command-line option), each input an existing, readable regular file,
// not all of them empty, and out_dir a directory if it exists. run_prep calls it first.
Status check_prep_options(const PrepOptions& opts);

// Writes out_dir/shard-NNNNN.lbs (and heldout_dir's). They are written to a staging directory
// inside each and replace the shard files of an earlier run there only when the whole run
// succeeded: on any error both keep what they had. `base` gives the vocab identity and special ids
// recorded in each header.
Status run_prep(const PrepOptions& opts, const ShardInfo& base, const MaskingVocab& vocab,
                const TokenizeFn& tokenize, PrepStats* stats);

}  // namespace lansbert
