// Philox4x32-10 over many counter blocks at once for the CPU's dropout loops (element e
// takes word e % 4 of block e / 4, as kern::dropout_block defines).
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>

#include "lansbert/core/philox.h"

namespace lansbert::cpu {

// Philox4x32-10 for kLanes consecutive counter blocks at once, in structure-of-arrays form so
// the compiler maps the 32x32->64-bit products onto vector multiplies (the scalar generator
// costs more than the rest of dropout). Bit-identical to philox4x32_10 (tested).
constexpr int kLanes = 16;

inline void philox_lanes(RngKey key, uint64_t first_block, uint32_t out[4][kLanes]) {
  uint32_t c0[kLanes], c1[kLanes], c2[kLanes], c3[kLanes];
  for (int l = 0; l < kLanes; ++l) {
    const uint64_t b = first_block + uint64_t(l);
    c0[l] = uint32_t(b);
    c1[l] = uint32_t(b >> 32);
    c2[l] = key.site;
    c3[l] = key.step;
  }
  uint32_t k0 = uint32_t(key.seed), k1 = uint32_t(key.seed >> 32);
  for (int round = 0; round < 10; ++round) {
    if (round > 0) {
      k0 += 0x9E3779B9u;
      k1 += 0xBB67AE85u;
    }
    for (int l = 0; l < kLanes; ++l) {
      const uint64_t p0 = uint64_t(0xD2511F53u) * c0[l];
      const uint64_t p1 = uint64_t(0xCD9E8D57u) * c2[l];
      const uint32_t n0 = uint32_t(p1 >> 32) ^ c1[l] ^ k0;
      const uint32_t n2 = uint32_t(p0 >> 32) ^ c3[l] ^ k1;
      c1[l] = uint32_t(p1);
      c3[l] = uint32_t(p0);
      c0[l] = n0;
      c2[l] = n2;
    }
  }
  for (int l = 0; l < kLanes; ++l) {
    out[0][l] = c0[l];
    out[1][l] = c1[l];
    out[2][l] = c2[l];
    out[3][l] = c3[l];
  }
}

// Walks n elements in groups of kLanes Philox blocks (4 * kLanes elements), in parallel
// when `parallel`: f(i, bits) for each element i, bits being its 32 random bits (word i % 4
// of block i / 4), so every caller draws dropout_forward's mask.
template <typename F>
void for_each_dropout_bits(size_t n, RngKey key, bool parallel, F f) {
  constexpr size_t kGroup = 4 * kLanes;
  const size_t groups = (n + kGroup - 1) / kGroup;
#pragma omp parallel for schedule(static) if (parallel)
  for (size_t g = 0; g < groups; ++g) {
    uint32_t bits[4][kLanes];
    philox_lanes(key, g * kLanes, bits);
    // In element order first: the loop over elements then reads its bits contiguously, so the
    // compiler vectorises it with the caller's f (a transposed read per element would not).
    uint32_t flat[kGroup];
    for (size_t j = 0; j < kGroup; ++j) flat[j] = bits[j & 3][j >> 2];
    const size_t begin = g * kGroup, count = std::min(n, begin + kGroup) - begin;
    for (size_t j = 0; j < count; ++j) f(begin + j, flat[j]);
  }
}

}  // namespace lansbert::cpu
