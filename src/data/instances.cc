// Instance creation and masking, following BERT's create_pretraining_data.py step by step
// (function names in comments refer to it) with two deliberate differences, both written
// in docs/data-format.md: random documents come from the same bounded block (so prep
// streams), and the masked count is round(prob * non-special positions) as BERT's create_pretraining_data.py does.
#include "lansbert/data/instances.h"

#include <omp.h>

#include <algorithm>
#include <cmath>

#include "lansbert/core/check.h"
#include "lansbert/data/philox_stream.h"

namespace lansbert {
namespace {

enum Purpose : uint32_t { kStructure = 0, kMasking = 1 };
constexpr uint32_t kDynamicSite = 0xD7A0000u;  // dynamic masking's stream family

RngKey document_key(uint64_t seed, uint64_t doc, int pass, Purpose purpose) {
  // step = low 32 bits of the document index; site = high bits, pass and purpose.
  const uint32_t site = static_cast<uint32_t>(((doc >> 32) << 20) |
                                              (static_cast<uint32_t>(pass) << 2) | purpose);
  return RngKey{seed, static_cast<uint32_t>(doc), site};
}

// Appends tokens [skip, skip + count) of the concatenation of `parts`.
void append_window(std::span<const std::span<const int32_t>> parts, int64_t skip, int64_t count,
                   std::vector<int32_t>* out) {
  for (const auto& part : parts) {
    if (count == 0) break;
    const int64_t size = static_cast<int64_t>(part.size());
    if (skip >= size) {
      skip -= size;
      continue;
    }
    const int64_t take = std::min(size - skip, count);
    out->insert(out->end(), part.begin() + skip, part.begin() + skip + take);
    skip = 0;
    count -= take;
  }
}

}  // namespace

PairCut truncate_pair(int64_t a_len, int64_t b_len, int64_t max_tokens, PhiloxStream* rng) {
  PairCut cut;
  while (a_len + b_len > max_tokens) {
    const bool from_a = a_len > b_len;  // the longer side; B on a tie, as the reference
    const bool front = rng->uniform() < 0.5;
    if (from_a) {
      --a_len;
      ++(front ? cut.a_front : cut.a_back);
    } else {
      --b_len;
      ++(front ? cut.b_front : cut.b_back);
    }
  }
  return cut;
}

void mask_tokens(int32_t* tokens, int n, int max_pred, float prob, bool whole_word,
                 const MaskingVocab& vocab, PhiloxStream* rng, std::vector<int32_t>* positions,
                 std::vector<int32_t>* ids) {
  positions->clear();
  ids->clear();
  // Candidate groups as [begin, end) ranges of positions (a whole word, or one piece).
  std::vector<std::pair<int, int>> cand;
  int num_candidates = 0;
  for (int i = 0; i < n; ++i) {
    const int32_t t = tokens[i];
    if (t == vocab.cls_id || t == vocab.sep_id) continue;
    ++num_candidates;
    const bool cont = whole_word && t >= 0 && static_cast<size_t>(t) < vocab.is_continuation.size() &&
                      vocab.is_continuation[t];
    if (cont && !cand.empty() && cand.back().second == i) {
      cand.back().second = i + 1;
    } else {
      cand.emplace_back(i, i + 1);
    }
  }
  if (num_candidates == 0) return;
  for (size_t i = cand.size(); i > 1; --i) {  // Fisher-Yates, as rng.shuffle
    std::swap(cand[i - 1], cand[rng->below(static_cast<uint32_t>(i))]);
  }
  const int to_predict =
      std::min(max_pred, std::max(1, static_cast<int>(std::lround(num_candidates * double(prob)))));
  for (const auto& [begin, end] : cand) {
    if (static_cast<int>(positions->size()) >= to_predict) break;
    if (static_cast<int>(positions->size()) + (end - begin) > to_predict) continue;
    for (int i = begin; i < end; ++i) {
      const int32_t original = tokens[i];
      int32_t replacement;
      if (rng->uniform() < 0.8) {
        replacement = vocab.mask_id;
      } else if (rng->uniform() < 0.5) {
        replacement = original;
      } else {
        replacement = static_cast<int32_t>(rng->below(static_cast<uint32_t>(vocab.vocab_size)));
      }
      tokens[i] = replacement;
      positions->push_back(i);
      ids->push_back(original);
    }
  }
  // Sort (position, id) pairs by position.
  std::vector<std::pair<int32_t, int32_t>> pairs(positions->size());
  for (size_t k = 0; k < pairs.size(); ++k) pairs[k] = {(*positions)[k], (*ids)[k]};
  std::sort(pairs.begin(), pairs.end());
  for (size_t k = 0; k < pairs.size(); ++k) {
    (*positions)[k] = pairs[k].first;
    (*ids)[k] = pairs[k].second;
  }
}

namespace {

// The instances of block[d], whose random streams are keyed by doc_index.
void instances_of_document(std::span<const Document> block, uint64_t doc_index, size_t d, int pass,
                           const InstanceOptions& opts, const MaskingVocab& vocab, std::vector<Instance>* out) {
  const Document& document = block[d];
  PhiloxStream rng(document_key(opts.seed, doc_index, pass, kStructure));
  PhiloxStream mask_rng(document_key(opts.seed, doc_index, pass, kMasking));

  const int max_num_tokens = opts.max_seq_len - 3;
  int target = max_num_tokens;
  if (rng.uniform() < opts.short_seq_prob) target = rng.randint(2, max_num_tokens);

  std::vector<const std::vector<int32_t>*> chunk;
  int chunk_len = 0;
  // A and B are lists of sentences, not copies: a sentence can be far longer than the
  // sequence (a whole book on one line), and only the window that survives truncation is
  // ever copied.
  std::vector<std::span<const int32_t>> a, b;
  const int num_sentences = static_cast<int>(document.size());
  for (int i = 0; i < num_sentences; ++i) {
    chunk.push_back(&document[i]);
    chunk_len += static_cast<int>(document[i].size());
    if (i != num_sentences - 1 && chunk_len < target) continue;
    const int chunk_size = static_cast<int>(chunk.size());
    const int a_end = chunk_size >= 2 ? rng.randint(1, chunk_size - 1) : 1;
    a.clear();
    b.clear();
    int64_t a_len = 0, b_len = 0;
    for (int j = 0; j < a_end; ++j) {
      a.emplace_back(*chunk[j]);
      a_len += static_cast<int64_t>(chunk[j]->size());
    }
    bool random_next = false;
    if (chunk_size == 1 || rng.uniform() < 0.5) {
      random_next = true;
      const int64_t target_b = target - a_len;
      size_t r = d;
      for (int tries = 0; tries < 10 && block.size() > 1; ++tries) {
        r = rng.below(static_cast<uint32_t>(block.size()));
        if (r != d) break;
      }
      const Document& other = block[r];
      // A sentence read here costs its length in truncation draws, and one long line can
      // be drawn by every instance of its block (quadratic time): read at most its start.
      const size_t cap = static_cast<size_t>(kRandomNextReadFactor) * static_cast<size_t>(opts.max_seq_len);
      if (!other.empty()) {
        const int start = rng.randint(0, static_cast<int>(other.size()) - 1);
        for (size_t j = start; j < other.size(); ++j) {
          b.emplace_back(other[j].data(), std::min(other[j].size(), cap));
          b_len += static_cast<int64_t>(b.back().size());
          if (b_len >= target_b) break;
        }
      }
      i -= chunk_size - a_end;  // put the unused sentences back
    } else {
      for (int j = a_end; j < chunk_size; ++j) {
        b.emplace_back(*chunk[j]);
        b_len += static_cast<int64_t>(chunk[j]->size());
      }
    }
    chunk.clear();
    chunk_len = 0;
    const PairCut cut = truncate_pair(a_len, b_len, max_num_tokens, &rng);
    const int64_t a_keep = a_len - cut.a_front - cut.a_back, b_keep = b_len - cut.b_front - cut.b_back;
    if (a_keep == 0 || b_keep == 0) continue;  // only from empty sentences; BERT asserts here

    Instance inst;
    inst.tokens.reserve(static_cast<size_t>(a_keep + b_keep + 3));
    inst.tokens.push_back(vocab.cls_id);
    append_window(a, cut.a_front, a_keep, &inst.tokens);
    inst.a_end = static_cast<int32_t>(inst.tokens.size());
    inst.tokens.push_back(vocab.sep_id);
    append_window(b, cut.b_front, b_keep, &inst.tokens);
    inst.tokens.push_back(vocab.sep_id);
    inst.is_random_next = random_next;
    if (!opts.dynamic_masking) {
      mask_tokens(inst.tokens.data(), static_cast<int>(inst.tokens.size()), opts.max_pred,
                  opts.masked_lm_prob, opts.whole_word, vocab, &mask_rng, &inst.masked_positions,
                  &inst.masked_ids);
    }
    out->push_back(std::move(inst));
  }
}

// The instances of documents [first, size) of the block in document order (the ones before
// are random-B candidates only); index_of(d) keys document d's streams.
template <typename IndexOf>
void instances_of_block(std::span<const Document> block, const IndexOf& index_of, size_t first, int pass,
                        const InstanceOptions& opts, const MaskingVocab& vocab, int threads,
                        std::vector<Instance>* out) {
  std::vector<std::vector<Instance>> per_doc(block.size());
  const int nthreads = threads > 0 ? threads : omp_get_max_threads();
  const int64_t n = static_cast<int64_t>(block.size());
#pragma omp parallel for schedule(dynamic, 16) num_threads(nthreads)
  for (int64_t d = static_cast<int64_t>(first); d < n; ++d) {
    const auto i = static_cast<size_t>(d);
    instances_of_document(block, index_of(i), i, pass, opts, vocab, &per_doc[d]);
  }
  for (auto& v : per_doc) {
    for (auto& inst : v) out->push_back(std::move(inst));
  }
}

}  // namespace

void create_instances_from_document(std::span<const Document> block, uint64_t first_doc_index,
                                    size_t d, int pass, const InstanceOptions& opts,
                                    const MaskingVocab& vocab, std::vector<Instance>* out) {
  instances_of_document(block, first_doc_index + d, d, pass, opts, vocab, out);
}

void create_instances(std::span<const Document> block, uint64_t first_doc_index, int pass,
                      const InstanceOptions& opts, const MaskingVocab& vocab, int threads,
                      std::vector<Instance>* out) {
  instances_of_block(block, [first_doc_index](size_t d) { return first_doc_index + d; }, 0, pass, opts, vocab,
                     threads, out);
}

void create_instances(std::span<const Document> block, std::span<const uint64_t> doc_indices, size_t first_to_make,
                      int pass, const InstanceOptions& opts, const MaskingVocab& vocab, int threads,
                      std::vector<Instance>* out) {
  LB_CHECK(doc_indices.size() == block.size() && first_to_make <= block.size());
  instances_of_block(block, [doc_indices](size_t d) { return doc_indices[d]; }, first_to_make, pass, opts, vocab,
                     threads, out);
}

void dynamic_mask_row(Batch* batch, int row, uint64_t seed, uint64_t epoch, uint64_t sample,
                      float prob, bool whole_word, const MaskingVocab& vocab) {
  LB_CHECK(row >= 0 && row < batch->batch);
  const int S = batch->seq_len, P = batch->max_pred;
  int32_t* ids = batch->input_ids.data() + size_t(row) * S;
  const int32_t* mask = batch->input_mask.data() + size_t(row) * S;
  int n = 0;
  while (n < S && mask[n]) ++n;
  // Element index: sample in the high bits, draw number in the low 20 (a row needs far fewer).
  PhiloxStream rng(RngKey{seed, static_cast<uint32_t>(epoch), kDynamicSite}, sample << 20);
  std::vector<int32_t> pos, orig;
  mask_tokens(ids, n, P, prob, whole_word, vocab, &rng, &pos, &orig);
  int32_t* mp = batch->masked_positions.data() + size_t(row) * P;
  int32_t* mi = batch->masked_ids.data() + size_t(row) * P;
  for (int k = 0; k < P; ++k) {
    const bool used = k < static_cast<int>(pos.size());
    mp[k] = used ? pos[k] : 0;
    mi[k] = used ? orig[k] : Batch::kIgnore;
  }
}

}  // namespace lansbert
