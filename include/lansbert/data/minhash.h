// MinHash and the LSH geometry of prep's `--near-dedup J` (the class that uses them:
// src/data/near_duplicates.h, whose comment explains the scheme).
#pragma once

#include <cstdint>
#include <span>

#include "lansbert/data/instances.h"

namespace lansbert {

// The LSH geometry for a threshold J: of all bands x rows <= kMaxHashes that drop a document
// of similarity J with a probability within kHalfTolerance of one half, the steepest at J.
// J in [kMinThreshold, kMaxThreshold].
struct LshPlan {
  static constexpr int kMaxHashes = 128;
  static constexpr double kMinThreshold = 0.5, kMaxThreshold = 0.99, kHalfTolerance = 0.05;
  int bands = 0, rows = 0;
  // The probability that a document of Jaccard similarity s to a kept one is dropped.
  double drop_probability(double s) const;
  double midpoint() const;  // where drop_probability is 0.5
};
LshPlan plan_lsh(double threshold);

inline constexpr int kShingleTokens = 5;

// The MinHash signature of `doc`, out.size() <= LshPlan::kMaxHashes (checked): out[k] = min
// over its shingles x of h_k(x). A window of kShingleTokens tokens that holds `unk_id` stands
// for text the vocabulary cannot show, so it is a shingle of this document only, made from
// `unk_key` (NearDuplicates passes a hash of the document's ids in order) and its place: the
// [UNK] runs of two texts in a script the vocabulary lacks do not make them alike, and exact
// or re-broken copies still match; near copies with [UNK] lose those windows from what they
// share. A document of fewer than kShingleTokens tokens is one shingle, all of it.
// The hashes are fixed here for good, like document_hash: the same text gives the same
// signature everywhere.
void minhash_signature(const Document& doc, int32_t unk_id, uint64_t unk_key, std::span<uint32_t> out);

}  // namespace lansbert
