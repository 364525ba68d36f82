// Attention softmax on the GPU: one warp per (batch, head, query) row. The warp reduces the
// row's max over unmasked keys and the sum (forward) or the dot product (backward); each
// element then goes through the shared pieces of lansbert/kernels/softmax.h, so a fully
// masked row gives zeros, as on the CPU.
#include <cfloat>

#include "cuda_ops.cuh"
#include "lansbert/kernels/softmax.h"
#include "launch.cuh"

namespace lansbert::cuda {

namespace {

constexpr int kWarpsPerBlock = 8;

__global__ void softmax_forward_kernel(const float* scores, const int32_t* key_mask, float* probs,
                                       int64_t rows, int rows_per_batch, int seq, float scale) {
  const int64_t row = int64_t(blockIdx.x) * kWarpsPerBlock + threadIdx.y;
  if (row >= rows) return;
  const int lane = threadIdx.x;
  const float* x = scores + row * seq;
  const int32_t* mask = key_mask + (row / rows_per_batch) * seq;
  float* p = probs + row * seq;
  float mx = -FLT_MAX;
  int any = 0;
  for (int j = lane; j < seq; j += 32)
    if (mask[j]) {
      mx = fmaxf(mx, scale * x[j]);
      any = 1;
    }
  mx = warp_max(mx);
  any = __any_sync(0xffffffffu, any);
  float sum = 0;
  for (int j = lane; j < seq; j += 32) {
    const float e = kern::masked_softmax_exp(x[j], mask[j], scale, mx);
    p[j] = e;
    sum += e;
  }
  const float inv = kern::masked_softmax_inv_sum(warp_sum(sum), any != 0);
  for (int j = lane; j < seq; j += 32) p[j] *= inv;
}

__global__ void softmax_backward_kernel(const float* dprobs, const float* probs, float* dscores,
                                        int64_t rows, int seq, float scale) {
  const int64_t row = int64_t(blockIdx.x) * kWarpsPerBlock + threadIdx.y;
  if (row >= rows) return;
  const int lane = threadIdx.x;
  const float* dp = dprobs + row * seq;
  const float* p = probs + row * seq;
  float dot = 0;
  for (int j = lane; j < seq; j += 32) dot += dp[j] * p[j];
  dot = warp_sum(dot);
  float* dx = dscores + row * seq;
  for (int j = lane; j < seq; j += 32) dx[j] = kern::masked_softmax_dx(dp[j], p[j], dot, scale);
}

unsigned row_blocks(int64_t rows) {
  return static_cast<unsigned>((rows + kWarpsPerBlock - 1) / kWarpsPerBlock);
}

}  // namespace

void CudaOps::softmax_forward(const float* scores, const int32_t* key_mask, float* probs, int batch,
                              int heads, int seq, float scale) {
  const int64_t rows = int64_t(batch) * heads * seq;
  if (rows <= 0) return;
  softmax_forward_kernel<<<row_blocks(rows), dim3(32, kWarpsPerBlock), 0, stream()>>>(
      scores, key_mask, probs, rows, heads * seq, seq, scale);
  LB_LAUNCH_CHECK();
}

void CudaOps::softmax_backward(const float* dprobs, const float* probs, float* dscores, int batch,
                               int heads, int seq, float scale) {
  const int64_t rows = int64_t(batch) * heads * seq;
  if (rows <= 0) return;
  softmax_backward_kernel<<<row_blocks(rows), dim3(32, kWarpsPerBlock), 0, stream()>>>(
      dprobs, probs, dscores, rows, seq, scale);
  LB_LAUNCH_CHECK();
}

}  // namespace lansbert::cuda
