// Launch helpers shared by the backend's kernels: grid sizing for grid-stride loops, the
// post-launch check, warp and block reductions, and the deterministic column-sum kernel that
// bias and LayerNorm parameter gradients use. Every reduction here combines values in a
// fixed order (tree shapes depend only on the launch shape), so results are reproducible.
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>

#include "cuda_check.cuh"
#include "cuda_raii.cuh"

// After every launch: a bad configuration is reported where it happened.
#define LB_LAUNCH_CHECK() CUDA_CHECK(cudaGetLastError())

namespace lansbert::cuda {

constexpr int kThreads = 256;

// Blocks for a grid-stride loop over n elements: enough to fill the device, no more.
inline unsigned grid_for(size_t n, int threads = kThreads) {
  const size_t blocks = (n + threads - 1) / threads;
  constexpr size_t kMaxBlocks = 132 * 32;  // H100/H200 SMs x resident blocks, ample elsewhere
  return static_cast<unsigned>(blocks < 1 ? 1 : (blocks < kMaxBlocks ? blocks : kMaxBlocks));
}

// f(i) for every i < n.
template <typename F>
__global__ void map_kernel(size_t n, F f) {
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < n;
       i += size_t(gridDim.x) * blockDim.x)
    f(i);
}

template <typename F>
void launch_map(size_t n, cudaStream_t s, F f) {
  if (n == 0) return;
  map_kernel<<<grid_for(n), kThreads, 0, s>>>(n, f);
  LB_LAUNCH_CHECK();
}

template <typename T>
__device__ __forceinline__ T warp_sum(T v) {
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}

template <typename T>
__device__ __forceinline__ T warp_max(T v) {
  for (int o = 16; o > 0; o >>= 1) {
    const T w = __shfl_xor_sync(0xffffffffu, v, o);
    v = w > v ? w : v;
  }
  return v;
}

// Sum over the block; every thread gets the result. REQUIRES: blockDim.x a multiple of 32,
// at most 1024; `scratch` holds 32 values and is free on entry.
template <typename T>
__device__ T block_sum(T v, T* scratch) {
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, warps = blockDim.x >> 5;
  v = warp_sum(v);
  __syncthreads();  // scratch may still be read by a previous call
  if (lane == 0) scratch[warp] = v;
  __syncthreads();
  v = lane < warps ? scratch[lane] : T(0);
  return warp_sum(v);
}

// out_k[c] += sum over rows r of f(r, c) (K outputs per column, K <= 2), in two passes so
// that narrow matrices (768 columns = 24 column tiles) still fill the device:
//   1. block (column tile, split) owns 32 columns and a contiguous range of rows; thread
//      (x, y) sums rows y, y + 32, ... of the range, then the 32 partials of a column are
//      added in order and written to partial[split][k][c];
//   2. one thread per column adds the splits in order and accumulates into out_k[c]
//      (column_finish_kernel, which also finishes the fused LayerNorm backward's K = 3).
// The splits depend only on `rows`, so the result does not change from run to run.
constexpr int kColTile = 32;
constexpr int kRowsPerSplit = 256;
constexpr int kMaxSplits = 64;

inline int column_splits(int rows) {
  const int s = (rows + kRowsPerSplit - 1) / kRowsPerSplit;
  return s < 1 ? 1 : (s > kMaxSplits ? kMaxSplits : s);
}

template <int K, typename F>
__global__ void __launch_bounds__(kColTile* kColTile)
    column_partials_kernel(int rows, int cols, F f, float* partial) {
  __shared__ float part[K][kColTile][kColTile + 1];
  const int c = blockIdx.x * kColTile + threadIdx.x;
  const int split = blockIdx.y, splits = gridDim.y;
  const int r0 = static_cast<int>(int64_t(rows) * split / splits);
  const int r1 = static_cast<int>(int64_t(rows) * (split + 1) / splits);
  float acc[K] = {};
  if (c < cols)
    for (int r = r0 + threadIdx.y; r < r1; r += kColTile) {
      float v[K];
      f(r, c, v);
      for (int k = 0; k < K; ++k) acc[k] += v[k];
    }
  for (int k = 0; k < K; ++k) part[k][threadIdx.y][threadIdx.x] = acc[k];
  __syncthreads();
  if (threadIdx.y == 0 && c < cols)
    for (int k = 0; k < K; ++k) {
      float s = 0;
      for (int y = 0; y < kColTile; ++y) s += part[k][y][threadIdx.x];
      partial[(size_t(split) * K + k) * cols + c] = s;
    }
}

template <int K>
__global__ void column_finish_kernel(int cols, int splits, const float* partial, float* out0,
                                     float* out1, float* out2 = nullptr) {
  const int c = blockIdx.x * blockDim.x + threadIdx.x;
  if (c >= cols) return;
  float* outs[3] = {out0, out1, out2};
  for (int k = 0; k < K; ++k) {
    float s = 0;
    for (int sp = 0; sp < splits; ++sp) s += partial[(size_t(sp) * K + k) * cols + c];
    outs[k][c] += s;
  }
}

// `workspace` grows to splits * K * cols floats on first use.
template <int K, typename F>
void launch_column_sums(int rows, int cols, cudaStream_t s, DeviceBytes& workspace, F f,
                        float* out0, float* out1) {
  if (rows <= 0 || cols <= 0) return;
  const int splits = column_splits(rows);
  workspace.reserve(size_t(splits) * K * cols * sizeof(float));
  float* partial = static_cast<float*>(workspace.get());
  const dim3 grid((cols + kColTile - 1) / kColTile, splits), block(kColTile, kColTile);
  column_partials_kernel<K><<<grid, block, 0, s>>>(rows, cols, f, partial);
  LB_LAUNCH_CHECK();
  column_finish_kernel<K>
      <<<(cols + kThreads - 1) / kThreads, kThreads, 0, s>>>(cols, splits, partial, out0, out1);
  LB_LAUNCH_CHECK();
}

}  // namespace lansbert::cuda
