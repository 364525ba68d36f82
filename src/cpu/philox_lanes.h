// Philox4x32-10 over many counter blocks at once for the CPU's dropout loops (element e
// takes word e % 4 of block e / 4, as kern::dropout_block defines).
#pragma once

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

}  // namespace lansbert::cpu
