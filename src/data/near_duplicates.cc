// --near-dedup: the LSH geometry, MinHash signatures and the in-order decisions
// (near_duplicates.h).
#include "near_duplicates.h"

#include <omp.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <limits>

#include "hash_mix.h"

namespace lansbert {
namespace {

// h_k(x) = ((a_k x + b_k) mod 2^64) >> 32 for a 32-bit x and 64-bit a_k, b_k: Dietzfelbinger's
// multiply-add-shift, a strongly universal family from 32 to 32 bits, so the k-th min-hashes
// of two sets agree with probability close to their Jaccard similarity. a_k and b_k come from
// splitmix64 of a fixed seed: part of the format, like document_hash.
struct HashFamily {
  std::array<uint64_t, LshPlan::kMaxHashes> a{}, b{};
  HashFamily() {
    uint64_t state = kHashSeed ^ 0x6e6561722d646570ULL;  // "near-dep"
    for (int k = 0; k < LshPlan::kMaxHashes; ++k) {
      a[k] = hash_mix(state, 2 * k) | 1;
      b[k] = hash_mix(state, 2 * k + 1);
    }
  }
};

const HashFamily& family() {
  static const HashFamily f;
  return f;
}

void add_shingle(uint64_t shingle_hash, std::span<uint32_t> out) {
  const HashFamily& f = family();
  const uint64_t x = shingle_hash >> 32;
  for (size_t k = 0; k < out.size(); ++k) {
    out[k] = std::min(out[k], static_cast<uint32_t>((f.a[k] * x + f.b[k]) >> 32));
  }
}

// The drop probability's slope at s: d/ds of 1 - (1 - s^r)^b.
double slope(const LshPlan& p, double s) {
  return p.bands * std::pow(1 - std::pow(s, p.rows), p.bands - 1) * p.rows * std::pow(s, p.rows - 1);
}

}  // namespace

double LshPlan::drop_probability(double s) const { return 1 - std::pow(1 - std::pow(s, rows), bands); }

double LshPlan::midpoint() const { return std::pow(1 - std::pow(0.5, 1.0 / bands), 1.0 / rows); }

LshPlan plan_lsh(double threshold) {
  constexpr double kTolerance = 0.01;
  LshPlan best;
  double best_gap = std::numeric_limits<double>::infinity(), best_slope = -1;
  for (int bands = 1; bands <= LshPlan::kMaxHashes; ++bands) {
    for (int rows = 1; bands * rows <= LshPlan::kMaxHashes; ++rows) {
      const LshPlan p{bands, rows};
      const double gap = std::abs(p.midpoint() - threshold);
      const bool within = gap <= kTolerance, best_within = best_gap <= kTolerance;
      if (within && best_within) {
        const double s = slope(p, p.midpoint());
        if (s > best_slope) best = p, best_gap = gap, best_slope = s;
      } else if (within || (!best_within && gap < best_gap)) {
        best = p, best_gap = gap, best_slope = slope(p, p.midpoint());
      }
    }
  }
  return best;
}

void minhash_signature(const Document& doc, std::span<uint32_t> out) {
  std::fill(out.begin(), out.end(), std::numeric_limits<uint32_t>::max());
  // The last kShingleTokens ids, across sentence breaks, in a ring.
  std::array<uint32_t, kShingleTokens> window{};
  size_t seen = 0;
  for (const auto& sentence : doc) {
    for (const int32_t id : sentence) {
      window[seen % kShingleTokens] = static_cast<uint32_t>(id);
      if (++seen < kShingleTokens) continue;
      uint64_t h = kHashSeed;
      for (size_t i = seen; i < seen + kShingleTokens; ++i) h = hash_mix(h, window[i % kShingleTokens]);
      add_shingle(h, out);
    }
  }
  if (seen < kShingleTokens) {  // too short for one shingle: all of it is one (its length in the hash)
    uint64_t h = hash_mix(kHashSeed, seen | (uint64_t(1) << 63));
    for (size_t i = 0; i < seen; ++i) h = hash_mix(h, window[i]);
    add_shingle(h, out);
  }
}

int64_t NearDuplicates::drop(std::vector<Document>* docs, int threads) {
  const size_t hashes = static_cast<size_t>(plan_.bands) * plan_.rows;
  const auto n = static_cast<int64_t>(docs->size());
  signatures_.resize(static_cast<size_t>(n) * hashes);
#pragma omp parallel for schedule(dynamic, 16) num_threads(threads)
  for (int64_t d = 0; d < n; ++d) {
    minhash_signature((*docs)[d], std::span<uint32_t>(signatures_.data() + d * hashes, hashes));
  }
  keys_.resize(plan_.bands);
  size_t kept = 0;
  for (int64_t d = 0; d < n; ++d) {
    const uint32_t* sig = signatures_.data() + d * hashes;
    bool near = false;
    for (int band = 0; band < plan_.bands; ++band) {
      uint64_t key = hash_mix(kHashSeed, static_cast<uint64_t>(band));
      for (int r = 0; r < plan_.rows; ++r) key = hash_mix(key, sig[band * plan_.rows + r]);
      keys_[band] = key;
      near = near || seen_bands_.contains(key);
    }
    if (near) continue;
    for (const uint64_t key : keys_) seen_bands_.insert(key);
    if (kept != static_cast<size_t>(d)) (*docs)[kept] = std::move((*docs)[d]);
    ++kept;
  }
  const auto dropped = static_cast<int64_t>(docs->size() - kept);
  docs->resize(kept);
  return dropped;
}

}  // namespace lansbert
