// Philox4x32-10 (Salmon et al., "Parallel random numbers: as easy as 1, 2, 3", SC'11), the
// counter-based generator behind dropout masks, MLM masking and data order. It is a pure
// function of (counter, key), so any element of any step can be drawn on any device, by
// any thread, in any order, and a resumed or re-sharded run draws the same numbers.
#pragma once

#include <cstdint>

#include "lansbert/core/host_device.h"

namespace lansbert {

struct Philox4x32 {
  uint32_t v[4];
};

LB_HOST_DEVICE void philox_mulhilo(uint32_t a, uint32_t b, uint32_t* hi, uint32_t* lo) {
  const uint64_t p = static_cast<uint64_t>(a) * static_cast<uint64_t>(b);
  *hi = static_cast<uint32_t>(p >> 32);
  *lo = static_cast<uint32_t>(p);
}

// REQUIRES: nothing. Returns the 10-round Philox4x32 block for (ctr, key).
LB_HOST_DEVICE Philox4x32 philox4x32_10(Philox4x32 ctr, uint32_t k0, uint32_t k1) {
  constexpr uint32_t kM0 = 0xD2511F53u, kM1 = 0xCD9E8D57u;
  constexpr uint32_t kW0 = 0x9E3779B9u, kW1 = 0xBB67AE85u;
  for (int round = 0; round < 10; ++round) {
    if (round > 0) {  // the key is bumped between rounds, not before the first
      k0 += kW0;
      k1 += kW1;
    }
    uint32_t hi0, lo0, hi1, lo1;
    philox_mulhilo(kM0, ctr.v[0], &hi0, &lo0);
    philox_mulhilo(kM1, ctr.v[2], &hi1, &lo1);
    ctr = Philox4x32{{hi1 ^ ctr.v[1] ^ k0, lo1, hi0 ^ ctr.v[3] ^ k1, lo0}};
  }
  return ctr;
}

// A uniform float in [0, 1) from the top 24 bits: exact in fp32, identical on every device.
LB_HOST_DEVICE float uniform01(uint32_t bits) { return static_cast<float>(bits >> 8) * (1.0f / 16777216.0f); }

// The key of one random stream: a run seed plus the stream's identity. Dropout uses
// (seed, micro-step counter, site: 0 for the embeddings, 1 + 3*layer + position in the layer,
// model/bert_model_impl.h dropout_site); element e then reads
// word e%4 of the block at counter (e/4 low, e/4 high, site, step).
struct RngKey {
  uint64_t seed = 0;
  uint32_t step = 0;
  uint32_t site = 0;
};

// Returns 32 random bits for element `e` of the stream `key`.
LB_HOST_DEVICE uint32_t philox_bits(RngKey key, uint64_t e) {
  const uint64_t block = e >> 2;
  Philox4x32 ctr{{static_cast<uint32_t>(block), static_cast<uint32_t>(block >> 32), key.site,
                  key.step}};
  Philox4x32 r = philox4x32_10(ctr, static_cast<uint32_t>(key.seed),
                               static_cast<uint32_t>(key.seed >> 32));
  return r.v[e & 3];
}

}  // namespace lansbert
