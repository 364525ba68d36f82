// Pretraining-instance creation, as BERT's create_pretraining_data.py does it (docs/data-format.md "lansbert prep"):
// documents of WordPiece-tokenized sentences become `[CLS] A [SEP] B [SEP]` pairs with a
// next-sentence label and masked-LM targets. Every random choice comes from a Philox stream
// keyed by (seed, document index, dupe pass, purpose), so the instances of a document do
// not depend on the order or the thread in which documents are processed. The same masking
// rule is exposed for dynamic masking at load time, keyed by (seed, epoch, sample index).
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "lansbert/model/batch.h"

namespace lansbert {

// A document: its sentences, each a list of WordPiece ids (no [CLS]/[SEP]).
using Document = std::vector<std::vector<int32_t>>;

struct InstanceOptions {
  int max_seq_len = 128;
  int max_pred = 20;
  int dupe_factor = 5;
  float masked_lm_prob = 0.15f;
  float short_seq_prob = 0.1f;
  uint64_t seed = 12345;
  bool whole_word = false;
  // Leave instances unmasked (masked at load time with dynamic_mask_row).
  bool dynamic_masking = false;
};

// What masking needs to know about the vocabulary.
struct MaskingVocab {
  int32_t cls_id = 101;
  int32_t sep_id = 102;
  int32_t mask_id = 103;
  int32_t unk_id = 100;  // --near-dedup: a window that holds it is a shingle of its document alone
  int32_t vocab_size = 30522;
  // By id: true when the token continues a word ("##..."). Required for whole-word masking.
  std::vector<bool> is_continuation;
};

struct Instance {
  std::vector<int32_t> tokens;  // [CLS] A [SEP] B [SEP]; masked in place unless dynamic
  int32_t a_end = 0;            // position of the first [SEP]; segment B starts after it
  bool is_random_next = false;
  std::vector<int32_t> masked_positions;  // ascending
  std::vector<int32_t> masked_ids;        // original token at each masked position
};

// A random next sentence B is read from another document up to the target length, as the
// reference does, except that a sentence longer than this many times max_seq_len is read
// only up to that length. Truncation draws once per dropped token, so reading a whole
// long line for every instance whose B lands on it made prep quadratic; sentences this
// long (1024 tokens at seq len 128) only come from lines the sentence splitter could not
// cut, and B is truncated to less than max_seq_len anyway.
inline constexpr int kRandomNextReadFactor = 8;

// Appends the instances of document `d` of `block` for dupe pass `pass`. Random sentence B
// is drawn from another document of the same block. `first_doc_index` is the global index
// of block[0]; it keys the random streams.
void create_instances_from_document(std::span<const Document> block, uint64_t first_doc_index,
                                    size_t d, int pass, const InstanceOptions& opts,
                                    const MaskingVocab& vocab, std::vector<Instance>* out);

// All instances of `block` for one dupe pass, in document order, using up to `threads`
// threads (0 = OpenMP's default). The result is the same for every thread count.
void create_instances(std::span<const Document> block, uint64_t first_doc_index, int pass,
                      const InstanceOptions& opts, const MaskingVocab& vocab, int threads,
                      std::vector<Instance>* out);
// The same with document d's streams keyed by doc_indices[d] (one per document of `block`:
// prep's held-out split makes two blocks of one, each document keeping its global index), and
// only for documents [first_to_make, size): the ones before are candidates for random sentence
// B alone (the held-out set carries the tail of its last pool into the next).
void create_instances(std::span<const Document> block, std::span<const uint64_t> doc_indices, size_t first_to_make,
                      int pass, const InstanceOptions& opts, const MaskingVocab& vocab, int threads,
                      std::vector<Instance>* out);

// truncate_seq_pair on lengths: how many tokens to drop from the front and the back of A
// and of B so that a_len + b_len <= max_tokens. As the reference, one token at a time from
// the longer side (B on a tie), from the front when a uniform draw is < 0.5; so the cut is
// the reference's for the same stream, but costs O(1) per dropped token, whereas erasing
// from the front of a vector cost O(length) each (quadratic on a long line).
struct PairCut {
  int64_t a_front = 0, a_back = 0, b_front = 0, b_back = 0;
};
class PhiloxStream;
PairCut truncate_pair(int64_t a_len, int64_t b_len, int64_t max_tokens, PhiloxStream* rng);

// BERT's masking of tokens[0, n): candidates are the positions that are not [CLS]/[SEP]
// (grouped into whole words when `whole_word`), shuffled; round(prob * candidates) of them,
// at least 1 and at most max_pred, are masked: 80% [MASK], 10% a random id, 10% unchanged.
// Writes ascending positions and original ids.
void mask_tokens(int32_t* tokens, int n, int max_pred, float prob, bool whole_word,
                 const MaskingVocab& vocab, PhiloxStream* rng, std::vector<int32_t>* positions,
                 std::vector<int32_t>* ids);

// Dynamic masking of row `row` of `batch` (stored unmasked), keyed by (seed, epoch,
// sample): fills the row's masked_positions/masked_ids and masks its input_ids.
void dynamic_mask_row(Batch* batch, int row, uint64_t seed, uint64_t epoch, uint64_t sample,
                      float prob, bool whole_word, const MaskingVocab& vocab);

}  // namespace lansbert
