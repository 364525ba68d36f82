// --near-dedup: the LSH geometry, MinHash signatures and the in-order decisions
// (near_duplicates.h).
#include "near_duplicates.h"

#include <omp.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <limits>

#include "drop_in_order.h"
#include "hash_mix.h"
#include "lansbert/core/check.h"

namespace lansbert {
namespace {

// h_k(x) = ((a_k x_lo + c_k x_hi + b_k) mod 2^64) >> 32 for the two 32-bit halves of a 64-bit
// shingle hash x and 64-bit a_k, c_k, b_k: Dietzfelbinger's vector multiply-add-shift, a
// strongly universal family from 64 to 32 bits, so the k-th min-hashes of two sets agree with
// probability close to their Jaccard similarity, and two different shingles have equal
// signatures only with odds of 2^-64 (a document of one shingle has nothing else to tell it
// apart; on 32 bits of x a million such documents held a hundred false pairs). The constants
// come from splitmix64 of a fixed seed: part of the format, like document_hash.
struct HashFamily {
  std::array<uint64_t, LshPlan::kMaxHashes> a{}, b{}, c{};
  HashFamily() {
    uint64_t state = kHashSeed ^ 0x6e6561722d646570ULL;  // "near-dep"
    for (int k = 0; k < LshPlan::kMaxHashes; ++k) {
      a[k] = hash_mix(state, 3 * k);
      b[k] = hash_mix(state, 3 * k + 1);
      c[k] = hash_mix(state, 3 * k + 2);
    }
  }
};

const HashFamily& family() {
  static const HashFamily f;
  return f;
}

void add_shingle(uint64_t shingle_hash, std::span<uint32_t> out) {
  const HashFamily& f = family();
  const uint64_t lo = shingle_hash & 0xffffffffu, hi = shingle_hash >> 32;
  for (size_t k = 0; k < out.size(); ++k) {
    out[k] = std::min(out[k], static_cast<uint32_t>((f.a[k] * lo + f.c[k] * hi + f.b[k]) >> 32));
  }
}

// The document's ids in order, sentence breaks left out (as the shingles leave them out):
// the key of its [UNK] windows, so that a copy broken into other sentences keeps them.
uint64_t token_stream_hash(const Document& doc) {
  uint64_t h = kHashSeed;
  for (const auto& sentence : doc) {
    for (const int32_t id : sentence) h = hash_mix(h, static_cast<uint32_t>(id));
  }
  return h;
}

// The drop probability's slope at s: d/ds of 1 - (1 - s^r)^b.
double slope(const LshPlan& p, double s) {
  return p.bands * std::pow(1 - std::pow(s, p.rows), p.bands - 1) * p.rows * std::pow(s, p.rows - 1);
}

}  // namespace

double LshPlan::drop_probability(double s) const { return 1 - std::pow(1 - std::pow(s, rows), bands); }

double LshPlan::midpoint() const { return std::pow(1 - std::pow(0.5, 1.0 / bands), 1.0 / rows); }

LshPlan plan_lsh(double threshold) {
  // Candidates drop a document of similarity J about half the time; the steepest there wins.
  // Should none (J outside [kMinThreshold, kMaxThreshold]), the one nearest one half.
  LshPlan best;
  double best_key = std::numeric_limits<double>::infinity();
  bool best_within = false;
  for (int bands = 1; bands <= LshPlan::kMaxHashes; ++bands) {
    for (int rows = 1; bands * rows <= LshPlan::kMaxHashes; ++rows) {
      const LshPlan p{bands, rows};
      const double gap = std::abs(p.drop_probability(threshold) - 0.5);
      const bool within = gap <= LshPlan::kHalfTolerance;
      const double key = within ? -slope(p, threshold) : gap;
      if ((within && !best_within) || (within == best_within && key < best_key)) {
        best = p, best_key = key, best_within = within;
      }
    }
  }
  return best;
}

void minhash_signature(const Document& doc, int32_t unk_id, uint64_t unk_key, std::span<uint32_t> out) {
  LB_CHECK(out.size() <= static_cast<size_t>(LshPlan::kMaxHashes));
  std::fill(out.begin(), out.end(), std::numeric_limits<uint32_t>::max());
  // The last kShingleTokens ids, across sentence breaks, in a ring. A window that holds the
  // last [UNK] is a shingle of this document only: unk_key and its place.
  std::array<uint32_t, kShingleTokens> window{};
  size_t seen = 0, unk_until = 0;  // the windows ending at or before unk_until hold an [UNK]
  for (const auto& sentence : doc) {
    for (const int32_t id : sentence) {
      window[seen % kShingleTokens] = static_cast<uint32_t>(id);
      if (id == unk_id) unk_until = seen + kShingleTokens;
      if (++seen < kShingleTokens) continue;
      uint64_t h = kHashSeed;
      if (seen <= unk_until) {
        h = hash_mix(hash_mix(unk_key, 0x756e6b6e6f776eULL), seen);  // "unknown"
      } else {
        for (size_t i = seen; i < seen + kShingleTokens; ++i) h = hash_mix(h, window[i % kShingleTokens]);
      }
      add_shingle(h, out);
    }
  }
  if (seen < kShingleTokens) {  // too short for one window: one shingle, all of it (its length first)
    uint64_t h = hash_mix(kHashSeed, seen | (uint64_t(1) << 63));
    for (size_t i = 0; i < seen; ++i) h = hash_mix(h, window[i]);
    add_shingle(h, out);
  }
}

int64_t NearDuplicates::drop(std::vector<Document>* docs, int threads) {
  const size_t hashes = static_cast<size_t>(plan_.bands) * plan_.rows, bands = plan_.bands;
  const auto n = static_cast<int64_t>(docs->size());
  // The band keys, in parallel: 8 bytes a band, where a block's whole signatures would take
  // 4 bytes a hash (480 bytes a document at J = 0.8) and many short documents make many.
  std::vector<uint64_t> keys(static_cast<size_t>(n) * bands);
#pragma omp parallel num_threads(threads)
  {
    std::vector<uint32_t> sig(hashes);
#pragma omp for schedule(dynamic, 16)
    for (int64_t d = 0; d < n; ++d) {
      minhash_signature((*docs)[d], unk_id_, token_stream_hash((*docs)[d]), sig);
      for (size_t band = 0; band < bands; ++band) {
        uint64_t key = hash_mix(kHashSeed, band);
        for (int r = 0; r < plan_.rows; ++r) key = hash_mix(key, sig[band * plan_.rows + r]);
        keys[static_cast<size_t>(d) * bands + band] = key;
      }
    }
  }
  return drop_in_order(docs, [&](size_t d, const Document&) {
    const std::span<const uint64_t> own(keys.data() + d * bands, bands);
    if (std::any_of(own.begin(), own.end(), [this](uint64_t key) { return seen_bands_.contains(key); })) return true;
    for (const uint64_t key : own) seen_bands_.insert(key);
    return false;
  });
}

}  // namespace lansbert
