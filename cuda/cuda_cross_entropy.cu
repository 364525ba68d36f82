// Softmax cross-entropy on the GPU: one block per row of logits (30522 classes for the MLM
// head, 2 for NSP). The block reduces the max with the first index that attains it (the CPU
// twin's argmax) and the sum of exp(x - max); the loss and each dlogit come from the shared
// pieces of lansbert/kernels/cross_entropy.h.
#include <cfloat>

#include "cuda_ops.cuh"
#include "lansbert/kernels/cross_entropy.h"
#include "launch.cuh"

namespace lansbert::cuda {

namespace {

struct MaxArg {
  float value;
  int index;
};

// The larger value; on a tie the smaller index (first occurrence).
__device__ __forceinline__ MaxArg better(MaxArg a, MaxArg b) {
  if (b.value > a.value || (b.value == a.value && b.index < a.index)) return b;
  return a;
}

// Row max, argmax and sum of exp(x - max) over a block; every thread gets them.
__device__ void row_stats(const float* x, int classes, MaxArg* best_out, float* sum_out) {
  __shared__ float sv[32];
  __shared__ int si[32];
  __shared__ float ssum[32];
  MaxArg best{x[0], 0};  // the CPU twin starts from x[0] and takes strictly greater values
  for (int j = threadIdx.x; j < classes; j += blockDim.x) best = better(best, {x[j], j});
  for (int o = 16; o > 0; o >>= 1) {
    MaxArg other{__shfl_xor_sync(0xffffffffu, best.value, o),
                 __shfl_xor_sync(0xffffffffu, best.index, o)};
    best = better(best, other);
  }
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, warps = blockDim.x >> 5;
  if (lane == 0) {
    sv[warp] = best.value;
    si[warp] = best.index;
  }
  __syncthreads();
  best = MaxArg{sv[0], si[0]};
  for (int w = 1; w < warps; ++w) best = better(best, {sv[w], si[w]});
  float s = 0;
  for (int j = threadIdx.x; j < classes; j += blockDim.x) s += kern::lb_exp(x[j] - best.value);
  *sum_out = block_sum(s, ssum);
  *best_out = best;
}

__global__ void __launch_bounds__(512)
    cross_entropy_forward_kernel(const float* logits, const int32_t* labels, float* losses,
                                 int32_t* correct, int classes) {
  const int r = blockIdx.x;
  const float* x = logits + size_t(r) * classes;
  MaxArg best;
  float sum;
  row_stats(x, classes, &best, &sum);
  if (threadIdx.x == 0) {
    const int32_t label = labels[r];
    losses[r] = kern::cross_entropy_loss(x, label, best.value, sum);
    correct[r] = label >= 0 && best.index == label;
  }
}

__global__ void __launch_bounds__(512)
    cross_entropy_backward_kernel(const float* logits, const int32_t* labels, float* dlogits,
                                  int classes, float weight) {
  const int r = blockIdx.x;
  const float* x = logits + size_t(r) * classes;
  float* dx = dlogits + size_t(r) * classes;
  const int32_t label = labels[r];
  MaxArg best;
  float sum;
  row_stats(x, classes, &best, &sum);
  for (int j = threadIdx.x; j < classes; j += blockDim.x)
    dx[j] = kern::cross_entropy_dx(x[j], j, label, best.value, sum, weight);
}

// Small rows (NSP's 2 classes) get one warp; vocabulary rows get 512 threads.
int threads_for(int classes) {
  return classes <= 64 ? 32 : 512;
}

}  // namespace

void CudaOps::cross_entropy_forward(const float* logits, const int32_t* labels, float* losses,
                                    int32_t* correct, int rows, int classes) {
  if (rows <= 0) return;
  cross_entropy_forward_kernel<<<rows, threads_for(classes), 0, stream()>>>(logits, labels, losses,
                                                                            correct, classes);
  LB_LAUNCH_CHECK();
}

void CudaOps::cross_entropy_backward(const float* logits, const int32_t* labels, float* dlogits,
                                     int rows, int classes, float weight) {
  if (rows <= 0) return;
  cross_entropy_backward_kernel<<<rows, threads_for(classes), 0, stream()>>>(
      logits, labels, dlogits, classes, weight);
  LB_LAUNCH_CHECK();
}

}  // namespace lansbert::cuda
