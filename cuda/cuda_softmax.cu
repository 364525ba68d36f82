// Attention softmax on the GPU: one warp per (batch, head, query) row. The warp reduces the
// row's max over unmasked keys and the sum (forward) or the dot product (backward); each
// element then goes through the shared pieces of lansbert/kernels/softmax.h, so a fully
// masked row gives zeros, as on the CPU. The dropout variants apply the attention dropout
// inside the same pass (element index = flat index into [B, A, S, S], as dropout_forward),
// which saves a pass over the probabilities each way; their lanes walk runs of four keys so
// one Philox call serves four elements.
#include <cfloat>

#include "cuda_ops.cuh"
#include "lansbert/kernels/dropout.h"
#include "lansbert/kernels/softmax.h"
#include "launch.cuh"

namespace lansbert::cuda {

namespace {

constexpr int kWarpsPerBlock = 8;

// Where a kernel writes its result: fp32 (the op's output tensor), or the 16-bit copy of a
// kept GEMM operand (the *_kept ops), rounded with the shared half.h body as a cast would.
struct F32Out {
  float* p;
  __device__ bool valid() const { return p != nullptr; }
  __device__ void put(int64_t i, float v) const { p[i] = v; }
};
struct HalfOut {
  uint16_t* p;
  kern::HalfFormat format;
  __device__ bool valid() const { return true; }
  __device__ void put(int64_t i, float v) const { p[i] = kern::float_to_half(v, format); }
};

// pd not valid (a null F32Out): plain softmax; else also pd = dropout(probs) with (p_drop, key).
template <typename Out>
__global__ void softmax_forward_kernel(const float* scores, const int32_t* key_mask, float* probs,
                                       int64_t rows, int rows_per_batch, int seq, float scale,
                                       Out pd = {}, float p_drop = 0, RngKey key = {}) {
  const int64_t row = int64_t(blockIdx.x) * kWarpsPerBlock + threadIdx.y;
  if (row >= rows) return;
  const int lane = threadIdx.x;
  const float* x = scores + row * seq;
  const int32_t* mask = key_mask + (row / rows_per_batch) * seq;
  const int32_t query = mask[row % seq];  // rows are (batch, head, query)
  float* p = probs + row * seq;
  float mx = -FLT_MAX;
  int any = 0;
  for (int j = lane; j < seq; j += 32)
    if (kern::attention_visible(mask[j], query)) {
      mx = fmaxf(mx, scale * x[j]);
      any = 1;
    }
  mx = warp_max(mx);
  any = __any_sync(0xffffffffu, any);
  float sum = 0;
  for (int j = lane; j < seq; j += 32) {
    const float e = kern::masked_softmax_exp(x[j], kern::attention_visible(mask[j], query), scale, mx);
    p[j] = e;
    sum += e;
  }
  const float inv = kern::masked_softmax_inv_sum(warp_sum(sum), any != 0);
  if (!pd.valid()) {
    for (int j = lane; j < seq; j += 32) p[j] *= inv;
    return;
  }
  // With dropout each lane takes runs of four consecutive keys, so one Philox call serves
  // the four decisions of a run (kern::DropoutBits) instead of one call per element. The
  // lane then reads p[j] written by another lane of its warp in the loop above, hence the
  // __syncwarp (which orders the warp's global memory accesses).
  __syncwarp();
  const uint64_t base = uint64_t(row) * seq;
  kern::DropoutBits bits(key);
  kern::for_lane_runs(lane, seq, [&](int j) {
    const float v = p[j] * inv;
    p[j] = v;
    pd.put(int64_t(base) + j, kern::dropout_scale(v, bits(base + j), p_drop));
  });
}

// p_drop > 0: dprobs is the gradient of the dropped probabilities. Each element is dropped
// (the forward's mask, redrawn) in the first loop, whose lanes take runs of four consecutive
// keys so one Philox call serves a run (kern::DropoutBits), and parked in `park` (fp32: dx,
// or dprobs itself when dx is a 16-bit copy) until the second loop, which reads it back (the
// same lane, the same j). dx and park may alias dprobs: each element is read, then written,
// by one lane.
template <typename Out>
__global__ void softmax_backward_kernel(const float* dprobs, const float* probs, Out dx, int64_t rows, int seq,
                                        float scale, float p_drop = 0, RngKey key = {}, float* park = nullptr) {
  const int64_t row = int64_t(blockIdx.x) * kWarpsPerBlock + threadIdx.y;
  if (row >= rows) return;
  const int lane = threadIdx.x;
  const float* dp = dprobs + row * seq;
  const float* p = probs + row * seq;
  const int64_t base = row * seq;
  float dot = 0;
  if (p_drop > 0) {
    float* g_row = park + row * seq;
    kern::DropoutBits bits(key);
    kern::for_lane_runs(lane, seq, [&](int j) {
      const float g = kern::dropout_scale(dp[j], bits(uint64_t(base) + j), p_drop);
      g_row[j] = g;
      dot += g * p[j];
    });
    dot = warp_sum(dot);
    kern::for_lane_runs(lane, seq,
                        [&](int j) { dx.put(base + j, kern::masked_softmax_dx(g_row[j], p[j], dot, scale)); });
    return;
  }
  for (int j = lane; j < seq; j += 32) dot += dp[j] * p[j];
  dot = warp_sum(dot);
  for (int j = lane; j < seq; j += 32) dx.put(base + j, kern::masked_softmax_dx(dp[j], p[j], dot, scale));
}

unsigned row_blocks(int64_t rows) {
  return static_cast<unsigned>((rows + kWarpsPerBlock - 1) / kWarpsPerBlock);
}

}  // namespace

void CudaOps::softmax_forward(const float* scores, const int32_t* key_mask, float* probs, int batch,
                              int heads, int seq, float scale) {
  const int64_t rows = int64_t(batch) * heads * seq;
  if (rows <= 0) return;
  softmax_forward_kernel<F32Out><<<row_blocks(rows), dim3(32, kWarpsPerBlock), 0, stream()>>>(
      scores, key_mask, probs, rows, heads * seq, seq, scale);
  LB_LAUNCH_CHECK();
}

void CudaOps::softmax_backward(const float* dprobs, const float* probs, float* dscores, int batch,
                               int heads, int seq, float scale) {
  const int64_t rows = int64_t(batch) * heads * seq;
  if (rows <= 0) return;
  softmax_backward_kernel<<<row_blocks(rows), dim3(32, kWarpsPerBlock), 0, stream()>>>(
      dprobs, probs, F32Out{dscores}, rows, seq, scale);
  LB_LAUNCH_CHECK();
}

void CudaOps::softmax_dropout_forward(const float* scores, const int32_t* key_mask, float* probs, float* probs_drop,
                                      int batch, int heads, int seq, float scale, float p, RngKey key) {
  const int64_t rows = int64_t(batch) * heads * seq;
  if (rows <= 0) return;
  softmax_forward_kernel<<<row_blocks(rows), dim3(32, kWarpsPerBlock), 0, stream()>>>(
      scores, key_mask, probs, rows, heads * seq, seq, scale, F32Out{probs_drop}, p, key);
  LB_LAUNCH_CHECK();
}

void CudaOps::dropout_softmax_backward(float* dprobs_drop, const float* probs, float* dscores, int batch, int heads,
                                       int seq, float scale, float p, RngKey key) {
  const int64_t rows = int64_t(batch) * heads * seq;
  if (rows <= 0) return;
  softmax_backward_kernel<<<row_blocks(rows), dim3(32, kWarpsPerBlock), 0, stream()>>>(
      dprobs_drop, probs, F32Out{dscores}, rows, seq, scale, p, key, dscores);
  LB_LAUNCH_CHECK();
}

// The kept variants: the result goes into the span's 16-bit copy (kept_output), not the fp32
// tensor, where GEMM operands are converted and kept; otherwise the plain op and a keep.
void CudaOps::softmax_dropout_forward_kept(const float* scores, const int32_t* key_mask, float* probs,
                                           float* probs_drop, int batch, int heads, int seq, float scale, float p,
                                           RngKey key) {
  const int64_t rows = int64_t(batch) * heads * seq;
  uint16_t* out = kept_output(probs_drop, size_t(rows) * seq);
  if (!out)
    return Ops<float>::softmax_dropout_forward_kept(scores, key_mask, probs, probs_drop, batch, heads, seq, scale, p,
                                                    key);
  softmax_forward_kernel<<<row_blocks(rows), dim3(32, kWarpsPerBlock), 0, stream()>>>(
      scores, key_mask, probs, rows, heads * seq, seq, scale, HalfOut{out, gemm_half_format(options_.math)}, p, key);
  LB_LAUNCH_CHECK();
}

void CudaOps::softmax_backward_kept(float* dprobs, const float* probs, float* dscores, int batch, int heads, int seq,
                                    float scale, float p, RngKey key) {
  const int64_t rows = int64_t(batch) * heads * seq;
  uint16_t* out = kept_output(dscores, size_t(rows) * seq);
  if (!out) return Ops<float>::softmax_backward_kept(dprobs, probs, dscores, batch, heads, seq, scale, p, key);
  // With dropout the dropped gradient is parked in dprobs (which the op may overwrite).
  softmax_backward_kernel<<<row_blocks(rows), dim3(32, kWarpsPerBlock), 0, stream()>>>(
      dprobs, probs, HalfOut{out, gemm_half_format(options_.math)}, rows, seq, scale, p, key, dprobs);
  LB_LAUNCH_CHECK();
}

}  // namespace lansbert::cuda
