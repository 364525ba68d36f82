// Element-wise dropout launches: f(i, bits) for every i < n with bits = philox_bits(key, i),
// one thread per Philox block of four elements. A Philox4x32-10 call (ten rounds of 32-bit
// multiplies) yields four words, one per element; drawing it per element, as
// kern::dropout_apply does, costs four calls per block, which makes attention-sized dropout
// compute-bound on integer multiplies rather than memory-bound.
#pragma once

#include "lansbert/kernels/dropout.h"
#include "launch.cuh"

namespace lansbert::cuda {

template <typename F>
__global__ void dropout_map_kernel(size_t n, RngKey key, F f) {
  const size_t blocks = (n + 3) / 4;
  for (size_t b = blockIdx.x * size_t(blockDim.x) + threadIdx.x; b < blocks; b += size_t(gridDim.x) * blockDim.x) {
    kern::for_dropout_block(key, b, n, f);
  }
}

template <typename F>
void launch_dropout_map(size_t n, RngKey key, cudaStream_t s, F f) {
  if (n == 0) return;
  const size_t blocks = (n + 3) / 4;
  dropout_map_kernel<<<grid_for(blocks), kThreads, 0, s>>>(n, key, f);
  LB_LAUNCH_CHECK();
}

}  // namespace lansbert::cuda
