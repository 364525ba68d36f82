// NearDuplicates: prep's `--near-dedup J`, which drops a document whose text is nearly that of
// a document kept before it (one word changed, a line added, a footer of its own), where
// `--dedup` drops only exact copies. Private to src/data.
//
// Similarity is the Jaccard similarity of two documents' sets of 5-token shingles (runs of 5
// consecutive WordPiece ids, across sentence breaks, so that the same words broken into other
// lines or sentences are the same set). Comparing every pair is quadratic; MinHash with
// locality-sensitive hashing (LSH) makes it one pass: each document gets `bands x rows` min-hashes
// (two documents' k-th min-hashes are equal with probability about their Jaccard similarity
// s), cut into `bands` bands of `rows`; a document is a near-duplicate when one of its bands
// equals the same band of a kept document, which happens with probability
// 1 - (1 - s^rows)^bands: an S-curve that rises steeply through J. Datatrove's pipeline for
// FineWeb uses the same scheme (5-grams, 14 bands of 8).
//
// Only kept documents enter the band tables, so no two kept documents share a band, and a
// document near one that was dropped (but not near a kept one) is kept. The decisions are made
// in input order; the signatures (the costly part) are computed on `threads` threads, and the
// result depends on neither the thread count nor the block size.
#pragma once

#include <cstdint>
#include <vector>

#include "lansbert/data/instances.h"
#include "lansbert/data/minhash.h"
#include "seen_documents.h"

namespace lansbert {

class NearDuplicates {
 public:
  NearDuplicates(double threshold, int32_t unk_id) : plan_(plan_lsh(threshold)), unk_id_(unk_id) {}
  const LshPlan& plan() const { return plan_; }
  // Drops from *docs, in order, each document near a kept one (an earlier document of this
  // call or of an earlier call); returns how many.
  int64_t drop(std::vector<Document>* docs, int threads);
  // The band tables' memory: 8 bytes a slot, at most half full, `bands` keys per kept document.
  size_t bytes() const { return seen_bands_.bytes(); }

 private:
  LshPlan plan_;
  int32_t unk_id_;
  SeenDocuments seen_bands_;  // a 64-bit key per (band index, band's min-hashes) of each kept document
};

}  // namespace lansbert
