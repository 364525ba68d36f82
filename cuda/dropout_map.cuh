// Element-wise dropout launches: f(i, bits) for every i < n with bits = philox_bits(key, i),
// one thread per Philox block of four elements. A Philox4x32-10 call (ten rounds of 32-bit
// multiplies) yields four words, one per element; drawing it per element, as
// kern::dropout_apply does, costs four calls per block, which makes attention-sized dropout
// compute-bound on integer multiplies rather than memory-bound.
#pragma once

#include "lansbert/kernels/dropout.h"
#include "launch.cuh"

namespace lansbert::cuda {

// launch_map's grid-stride loop over the (n + 3) / 4 Philox blocks.
template <typename F>
void launch_dropout_map(size_t n, RngKey key, cudaStream_t s, F f) {
  launch_map((n + 3) / 4, s, [=] __device__(size_t b) { kern::for_dropout_block(key, b, n, f); });
}

}  // namespace lansbert::cuda
