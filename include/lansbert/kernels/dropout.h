// Element math of dropout. The keep decision for element e is a pure function of the
// stream key (seed, micro-step, site) and e, so the mask is never stored: the backward pass
// redraws it, every thread count and every device draws the same mask, and a resumed run
// repeats it.
#pragma once

#include <cstdint>

#include "lansbert/core/philox.h"

namespace lansbert::kern {

// Keep decision from element e's 32 random bits (philox_bits(key, e)).
LB_HOST_DEVICE bool dropout_keep_bits(uint32_t bits, float p) { return uniform01(bits) >= p; }

// Returns true iff element e is kept at drop probability p (p in [0, 1)).
LB_HOST_DEVICE bool dropout_keep(RngKey key, uint64_t e, float p) {
  return dropout_keep_bits(philox_bits(key, e), p);
}

// Inverted dropout: kept values are scaled by 1/(1-p) so the expectation is unchanged.
// Forward and backward are the same map (y = m x / (1-p), dx = m dy / (1-p)).
template <typename T>
LB_HOST_DEVICE T dropout_scale(T x, uint32_t bits, float p) {
  return dropout_keep_bits(bits, p) ? x * (T(1) / (T(1) - T(p))) : T(0);
}

template <typename T>
LB_HOST_DEVICE T dropout_apply(T x, RngKey key, uint64_t e, float p) {
  return dropout_scale(x, philox_bits(key, e), p);
}

// The Philox block holding elements 4*block .. 4*block+3: one generator call serves four
// elements, which is how both launchers walk the tensor.
LB_HOST_DEVICE Philox4x32 dropout_block(RngKey key, uint64_t block) {
  return philox4x32_10(Philox4x32{{static_cast<uint32_t>(block), static_cast<uint32_t>(block >> 32),
                                   key.site, key.step}},
                       static_cast<uint32_t>(key.seed), static_cast<uint32_t>(key.seed >> 32));
}

// f(i, philox_bits(key, i)) for the elements i < n of Philox block b (i = 4b .. 4b+3): one
// generator call for the four. The GPU's element-wise dropout runs one thread per block.
template <typename F>
LB_HOST_DEVICE void for_dropout_block(RngKey key, uint64_t b, uint64_t n, F&& f) {
  const Philox4x32 w = dropout_block(key, b);
  for (int t = 0; t < 4; ++t) {
    const uint64_t i = 4 * b + t;
    if (i < n) f(i, w.v[t]);
  }
}

// The keys a lane of a 32-lane warp owns in a row of n when lanes take runs of four:
// f(j) for j = 128 r + 4 lane + t (t < 4, j < n), in increasing j. Runs of consecutive keys
// let kern::DropoutBits serve four dropout decisions with one generator call.
template <typename F>
LB_HOST_DEVICE void for_lane_runs(int lane, int n, F&& f) {
  for (int j0 = 4 * lane; j0 < n; j0 += 128)
    for (int j = j0; j < j0 + 4 && j < n; ++j) f(j);
}

// philox_bits(key, e) for a thread that walks runs of consecutive elements: the block of the
// last element asked for is kept, so a run of four aligned elements costs one generator call
// (ten Philox rounds) instead of four. Any order of e gives the same bits; only the number
// of calls depends on it. The GPU kernels use it; the CPU has its own 16-lane generator.
class DropoutBits {
 public:
  LB_HOST_DEVICE explicit DropoutBits(RngKey key) : key_(key) {}
  LB_HOST_DEVICE uint32_t operator()(uint64_t e) {
    const uint64_t block = e >> 2;
    if (!valid_ || block != block_) {
      words_ = dropout_block(key_, block);
      block_ = block;
      valid_ = true;
    }
    // Selected, not indexed: a run-time index into the words puts the object in the GPU's
    // local memory (a 48-byte stack frame and a load per element, in memory-bound kernels);
    // selects keep it in registers.
    const uint32_t low = (e & 1) ? words_.v[1] : words_.v[0], high = (e & 1) ? words_.v[3] : words_.v[2];
    return (e & 2) ? high : low;
  }

 private:
  RngKey key_;
  uint64_t block_ = 0;
  bool valid_ = false;
  Philox4x32 words_{};
};

}  // namespace lansbert::kern
