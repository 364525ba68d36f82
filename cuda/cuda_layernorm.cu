// LayerNorm on the GPU: one warp per row for the statistics and dx (two-pass mean and
// variance, as the CPU twin), then the shared element pieces of lansbert/kernels/layernorm.h;
// also with the residual block's bias, dropout and residual add before it in the same kernel
// (residual_layernorm_forward).
// The backward computes dx and dgamma/dbeta in one pass over dy and x where a row's columns
// fit a warp's registers (layernorm_backward_kernel); wider rows take dx, then fixed-order
// column sums over rows (launch.cuh). Both are deterministic: the order depends on the shape.
#include <algorithm>
#include <utility>

#include "cuda_ops.cuh"
#include "lansbert/kernels/dropout.h"
#include "lansbert/kernels/half.h"
#include "lansbert/kernels/layernorm.h"
#include "launch.cuh"

namespace lansbert::cuda {

namespace {

constexpr int kWarpsPerBlock = 8;

// One row's LayerNorm by one warp: the statistics in the lane-strided order (two passes, mean
// then variance around it, as the CPU twin), y and, when y16 is set, y's kept 16-bit copy in
// the same pass (layernorm_forward_kept); with a copy, yr may be null (the copy only). x(c) is
// the row's input at column c (an fp32 row, or a 16-bit one widened).
template <typename Row>
__device__ void layernorm_row(Row x, const float* gamma, const float* beta, float* yr, float* mean, float* rstd,
                              int cols, float eps, uint16_t* hr, kern::HalfFormat format) {
  const int lane = threadIdx.x;
  float s = 0;
  for (int c = lane; c < cols; c += 32) s += x(c);
  const float m = warp_sum(s) / float(cols);
  float v = 0;
  for (int c = lane; c < cols; c += 32) v += (x(c) - m) * (x(c) - m);
  const float rs = kern::layernorm_rstd(warp_sum(v) / float(cols), eps);
  if (hr) {
    for (int c = lane; c < cols; c += 32) {
      const float out = kern::layernorm_out(x(c), m, rs, gamma[c], beta[c]);
      if (yr) yr[c] = out;
      hr[c] = kern::float_to_half(out, format);
    }
  } else {
    for (int c = lane; c < cols; c += 32) yr[c] = kern::layernorm_out(x(c), m, rs, gamma[c], beta[c]);
  }
  if (lane == 0) {
    *mean = m;
    *rstd = rs;
  }
}

// An fp32 row, and a 16-bit one read widened, as layernorm_row's input.
struct Fp32Row {
  const float* x;
  __device__ float operator()(int c) const { return x[c]; }
};
struct HalfRow {
  const uint16_t* x;
  kern::HalfFormat format;
  __device__ float operator()(int c) const { return kern::half_to_float(x[c], format); }
};
__device__ inline Fp32Row row_of(const float* x, kern::HalfFormat) { return {x}; }
__device__ inline HalfRow row_of(const uint16_t* x, kern::HalfFormat format) { return {x, format}; }

// The gradient stream's rows (ResidualLayerNormGrad::grad_half): d(out) read from fp32 (rounded
// as read with grad_half) or from its 16-bit copy; d(sum) stored into fp32 or into its copy.
struct Fp32GradRow {
  const float* x;
  bool round;
  kern::HalfFormat format;
  __device__ float operator()(int c) const { return round ? kern::round_to_half(x[c], format) : x[c]; }
};
__device__ inline Fp32GradRow grad_row_of(const float* x, bool round, kern::HalfFormat format) {
  return {x, round, format};
}
__device__ inline HalfRow grad_row_of(const uint16_t* x, bool, kern::HalfFormat format) { return {x, format}; }
__device__ inline void store_grad(float* p, float v, kern::HalfFormat) { *p = v; }
__device__ inline void store_grad(uint16_t* p, float v, kern::HalfFormat format) {
  *p = kern::float_to_half(v, format);
}

__global__ void layernorm_forward_kernel(const float* x, const float* gamma, const float* beta,
                                         float* y, float* mean, float* rstd, int rows, int cols,
                                         float eps, uint16_t* y16 = nullptr,
                                         kern::HalfFormat format = kern::HalfFormat::kBf16) {
  const int row = blockIdx.x * kWarpsPerBlock + threadIdx.y;
  if (row >= rows) return;
  const size_t base = size_t(row) * cols;
  layernorm_row(Fp32Row{x + base}, gamma, beta, y + base, mean + row, rstd + row, cols, eps,
                y16 ? y16 + base : nullptr, format);
}

// bias_dropout_residual_forward and layernorm_forward of one row by one warp: the sum is
// written (the LayerNorm backward reads it) and read back by the same warp, from cache, instead
// of by a second kernel from memory. The residual pass walks runs of four elements per lane
// (kern::for_lane_runs) so that one Philox call serves four dropout decisions; the LayerNorm
// then runs in layernorm_row's order, so the result is the two kernels' bits. With
// a.residual_half the residual is used at its 16-bit rounding: res16, its kept copy, widened,
// or without one a.residual rounded here; with a.out_copy_only only out16 is written. With
// a.sum_half y and the sum are used rounded: with sum16 (a.sum_copy_only: y's kept copy) y is
// read from it and the sum written back into it, else both are rounded here, in fp32 memory.
__global__ void residual_layernorm_kernel(ResidualLayerNorm<float> a, const uint16_t* res16, uint16_t* out16,
                                          uint16_t* sum16, kern::HalfFormat format) {
  const int row = blockIdx.x * kWarpsPerBlock + threadIdx.y;
  if (row >= a.rows) return;
  const int cols = a.cols;
  const size_t base = size_t(row) * cols;
  float* yr = a.y + base;
  uint16_t* sr = sum16 ? sum16 + base : nullptr;
  kern::DropoutBits bits(a.key);
  kern::for_lane_runs(threadIdx.x, cols, [&](int c) {
    const float y = sr ? kern::half_to_float(sr[c], format) : a.sum_half ? kern::round_to_half(yr[c], format) : yr[c];
    const float z = y + a.bias[c];
    const float r = res16 ? kern::half_to_float(res16[base + c], format)
                    : a.residual_half ? kern::round_to_half(a.residual[base + c], format)
                                      : a.residual[base + c];
    const float sum = (a.p > 0.0f ? kern::dropout_scale(z, bits(base + c), a.p) : z) + r;
    if (sr)
      sr[c] = kern::float_to_half(sum, format);
    else
      yr[c] = a.sum_half ? kern::round_to_half(sum, format) : sum;
  });
  __syncwarp();  // the lanes read each other's sums
  float* const out = a.out_copy_only ? nullptr : a.out + base;
  uint16_t* const out_copy = out16 ? out16 + base : nullptr;
  if (sr)
    layernorm_row(HalfRow{sr, format}, a.gamma, a.beta, out, a.mean + row, a.rstd + row, cols, a.eps, out_copy, format);
  else
    layernorm_row(Fp32Row{yr}, a.gamma, a.beta, out, a.mean + row, a.rstd + row, cols, a.eps, out_copy, format);
}

// The row means of layernorm_dx's two reductions, dy * gamma and dy * gamma * xhat, summed by
// one warp in the lane-strided order (every lane gets them).
template <typename DyRow, typename Row>
__device__ void layernorm_dx_means(DyRow dyr, Row x, const float* gamma, float m, float rs, int cols,
                                   float* mean_g, float* mean_gx) {
  float sum_g = 0, sum_gx = 0;
  for (int c = threadIdx.x; c < cols; c += 32) {
    const float g = dyr(c) * gamma[c];
    sum_g += g;
    sum_gx += g * (x(c) - m) * rs;
  }
  *mean_g = warp_sum(sum_g) / float(cols);
  *mean_gx = warp_sum(sum_gx) / float(cols);
}

__global__ void layernorm_dx_kernel(const float* dy, const float* x, const float* gamma,
                                    const float* mean, const float* rstd, float* dx, int rows,
                                    int cols) {
  const int row = blockIdx.x * kWarpsPerBlock + threadIdx.y;
  if (row >= rows) return;
  const int lane = threadIdx.x;
  const size_t base = size_t(row) * cols;
  const float m = mean[row], rs = rstd[row];
  float mean_g, mean_gx;
  layernorm_dx_means(Fp32Row{dy + base}, Fp32Row{x + base}, gamma, m, rs, cols, &mean_g, &mean_gx);
  for (int c = lane; c < cols; c += 32) {
    const float xhat = (x[base + c] - m) * rs;
    dx[base + c] = kern::layernorm_dx(dy[base + c], gamma[c], xhat, rs, mean_g, mean_gx);
  }
}

// Where the fused backward with kBias writes d(y) = dropout(dx): its kept 16-bit copy.
struct KeptGrad {
  uint16_t* dy16 = nullptr;
  kern::HalfFormat format = kern::HalfFormat::kBf16;
};

// The fused backward: block b owns rows [b * rows_per_block, ...), warp w of it rows w, w + 8,
// ... of that range. Lane l owns the runs of four columns 4 l + 128 i .. + 3 (i < kRuns), so
// one Philox call serves four dropout decisions; it keeps their parameter-gradient partials
// (dgamma, dbeta and with kBias dbias) in registers, adding each row's terms as it writes that
// row's dx. At the end the warps add their partials into shared memory one warp after another
// (a fixed order), and the block writes partial[b][k][c] for column_finish_kernel. dy and x
// are read once from memory (the second read of a row, for dx, comes from cache), where the
// two-pass path reads them again for the column sums: 12 bytes per element instead of 20; and
// the dropout-bias backward does not read dx back (4 more).
// Two blocks per SM (16 warps) asked of ptxas: at 1024 columns with the dbias partials the
// kernel then fits 128 registers without spills (sm_90); in an earlier form of this code it
// took 157 uncapped, one block per SM (8 warps), too few loads in flight for a pass bound by
// bandwidth. Whether it beats the two kernels has not been measured (no GPU lent yet).
// The sums x are fp32, or (Sum uint16_t: ResidualLayerNormGrad::sum_copy_only) a kept 16-bit
// copy, widened as read. So are dy (d(out)) and dx (d(sum)): fp32, rounded as read and written
// with grad_half, or (Grad uint16_t: grad_copy_only, grad_half implied) their 16-bit copies.
// The 16-bit format (kF; kept.format is ignored here) and whether fp32 gradients are rounded
// (kRound: grad_half) are template arguments: as run-time values the all-16-bit instance at
// 1024 columns spilled 208 bytes (ptxas -v, sm_90, 128 registers); as constants each
// conversion has one form, and the bf16 instances the model runs spill nothing (the rounding
// fp32 one at 1024 columns, 8 bytes). The fp16 ones at 768 and 1024 columns still spill
// (up to 232 bytes: kern::float_to_fp16 computes four candidates); fp16 is the V100's format,
// compiled for sm_70 by CUDA 12 with other register counts. None of it has been timed.
template <int kRuns, bool kBias, typename Sum, typename Grad, bool kRound, kern::HalfFormat kF>
__global__ void __launch_bounds__(32 * kWarpsPerBlock, 2)
    layernorm_backward_kernel(const Grad* dy, const Sum* x, const float* gamma, const float* mean,
                              const float* rstd, Grad* dx, int rows, int cols, float p, RngKey key, KeptGrad kept,
                              int rows_per_block, float* partial) {
  constexpr int K = kBias ? 3 : 2, kCols = 4 * kRuns;
  __shared__ float block_part[K * 128 * kRuns];  // [K][cols]: dgamma's partials, dbeta's, dbias's
  const int lane = threadIdx.x, warp = threadIdx.y;
  const int r0 = blockIdx.x * rows_per_block;
  const int r1 = min(rows, r0 + rows_per_block);
  float acc[K][kCols];
#pragma unroll
  for (int k = 0; k < K; ++k)
#pragma unroll
    for (int j = 0; j < kCols; ++j) acc[k][j] = 0.0f;
  for (int row = r0 + warp; row < r1; row += kWarpsPerBlock) {
    const size_t base = size_t(row) * cols;
    const float m = mean[row], rs = rstd[row];
    float mean_g, mean_gx;
    const auto xr = row_of(x + base, kF);
    const auto dyr = grad_row_of(dy + base, kRound, kF);
    layernorm_dx_means(dyr, xr, gamma, m, rs, cols, &mean_g, &mean_gx);
    Philox4x32 bits{};  // the run's four dropout words (kBias: cols is a multiple of 4, so a run is a block)
#pragma unroll
    for (int j = 0; j < kCols; ++j) {
      const int c = 128 * (j / 4) + 4 * lane + j % 4;
      if (c < cols) {
        const size_t i = base + c;
        if (kBias && j % 4 == 0 && p > 0.0f) bits = kern::dropout_block(key, i / 4);
        const float d = dyr(c), xhat = (xr(c) - m) * rs;
        float g = kern::layernorm_dx(d, gamma[c], xhat, rs, mean_g, mean_gx);
        if (kRound) g = kern::round_to_half(g, kF);  // d(sum) as stored, for dy and dbias too
        store_grad(dx + i, g, kF);
        acc[0][j] += d * xhat;
        acc[1][j] += d;
        if constexpr (kBias) {
          const float gy = p > 0.0f ? kern::dropout_scale(g, bits.v[j % 4], p) : g;
          kept.dy16[i] = kern::float_to_half(gy, kF);
          acc[K - 1][j] += gy;
        }
      }
    }
  }
  for (int w = 0; w < kWarpsPerBlock; ++w) {
    if (warp == w) {
#pragma unroll
      for (int j = 0; j < kCols; ++j) {
        const int c = 128 * (j / 4) + 4 * lane + j % 4;
        if (c < cols)
#pragma unroll
          for (int k = 0; k < K; ++k)
            block_part[k * cols + c] = w == 0 ? acc[k][j] : block_part[k * cols + c] + acc[k][j];
      }
    }
    __syncthreads();
  }
  const int t = warp * 32 + lane;
  for (int c = t; c < K * cols; c += 32 * kWarpsPerBlock) partial[size_t(blockIdx.x) * K * cols + c] = block_part[c];
}

// Rows of one fused-backward block: 4 a warp, more when that would give more than 2 blocks per
// SM of an H100/H200 (the column finish then adds fewer partials). Depends only on `rows`.
int fused_backward_rows_per_block(int rows) {
  constexpr int kMinRows = 4 * kWarpsPerBlock, kMaxBlocks = 2 * 132;
  const int blocks = std::min((rows + kMinRows - 1) / kMinRows, kMaxBlocks);
  return (rows + blocks - 1) / blocks;
}

// a: the LayerNorm backward's arguments, with kBias dy (its copy: kept), dbias, p and key; the
// sums read from `sum` (a.sum, or its 16-bit copy), d(out) from dout and d(sum) written to dsum
// (a.dout and a.dsum, or their copies).
template <int kRuns, bool kBias, typename Sum, typename Grad, bool kRound>
void launch_layernorm_backward(const ResidualLayerNormGrad<float>& a, const Sum* sum, const Grad* dout, Grad* dsum,
                               const KeptGrad& kept, cudaStream_t s, DeviceBytes& workspace) {
  constexpr int K = kBias ? 3 : 2;
  const int per_block = fused_backward_rows_per_block(a.rows);
  const int blocks = (a.rows + per_block - 1) / per_block;
  workspace.reserve(size_t(blocks) * K * a.cols * sizeof(float));
  float* partial = static_cast<float*>(workspace.get());
  const dim3 block(32, kWarpsPerBlock);
  constexpr kern::HalfFormat kBf16 = kern::HalfFormat::kBf16, kFp16 = kern::HalfFormat::kFp16;
  if (!kBias || kept.format == kBf16)  // without kBias nothing is converted: one instance
    layernorm_backward_kernel<kRuns, kBias, Sum, Grad, kRound, kBf16><<<blocks, block, 0, s>>>(
        dout, sum, a.gamma, a.mean, a.rstd, dsum, a.rows, a.cols, a.p, a.key, kept, per_block, partial);
  else if constexpr (kBias)
    layernorm_backward_kernel<kRuns, kBias, Sum, Grad, kRound, kFp16><<<blocks, block, 0, s>>>(
        dout, sum, a.gamma, a.mean, a.rstd, dsum, a.rows, a.cols, a.p, a.key, kept, per_block, partial);
  LB_LAUNCH_CHECK();
  column_finish_kernel<K><<<(a.cols + kThreads - 1) / kThreads, kThreads, 0, s>>>(a.cols, blocks, partial, a.dgamma,
                                                                                 a.dbeta, kBias ? a.dbias : nullptr);
  LB_LAUNCH_CHECK();
}

// The fused backward in the narrowest instance whose runs hold a row (up to 1024 columns:
// bert-large); false, and nothing launched, for wider rows.
template <bool kBias, typename Sum, typename Grad = float, bool kRound = false>
bool launch_fused_layernorm_backward(const ResidualLayerNormGrad<float>& a, const Sum* sum, const Grad* dout,
                                     Grad* dsum, const KeptGrad& kept, cudaStream_t s, DeviceBytes& workspace) {
  using Launch = void (*)(const ResidualLayerNormGrad<float>&, const Sum*, const Grad*, Grad*, const KeptGrad&,
                          cudaStream_t, DeviceBytes&);
  constexpr std::pair<int, Launch> kInstances[] = {{2, launch_layernorm_backward<2, kBias, Sum, Grad, kRound>},
                                                   {4, launch_layernorm_backward<4, kBias, Sum, Grad, kRound>},
                                                   {6, launch_layernorm_backward<6, kBias, Sum, Grad, kRound>},
                                                   {8, launch_layernorm_backward<8, kBias, Sum, Grad, kRound>}};
  for (const auto& [runs, launch] : kInstances)
    if (a.cols <= 128 * runs) {
      launch(a, sum, dout, dsum, kept, s, workspace);
      return true;
    }
  return false;
}

}  // namespace

void CudaOps::layernorm_forward(const float* x, const float* gamma, const float* beta, float* y,
                                float* mean, float* rstd, int rows, int cols, float eps) {
  if (rows <= 0) return;
  const dim3 block(32, kWarpsPerBlock);
  layernorm_forward_kernel<<<(rows + kWarpsPerBlock - 1) / kWarpsPerBlock, block, 0, stream()>>>(
      x, gamma, beta, y, mean, rstd, rows, cols, eps);
  LB_LAUNCH_CHECK();
}

void CudaOps::layernorm_forward_kept(const float* x, const float* gamma, const float* beta, float* y, float* mean,
                                     float* rstd, int rows, int cols, float eps) {
  uint16_t* y16 = kept_output(y, size_t(rows) * cols);
  if (!y16 || rows <= 0) return Ops<float>::layernorm_forward_kept(x, gamma, beta, y, mean, rstd, rows, cols, eps);
  const dim3 block(32, kWarpsPerBlock);
  layernorm_forward_kernel<<<(rows + kWarpsPerBlock - 1) / kWarpsPerBlock, block, 0, stream()>>>(
      x, gamma, beta, y, mean, rstd, rows, cols, eps, y16, gemm_half_format(options_.math));
  LB_LAUNCH_CHECK();
}

void CudaOps::residual_layernorm_forward(const ResidualLayerNorm<float>& a) {
  if (a.rows <= 0) return;
  const size_t n = size_t(a.rows) * a.cols;
  uint16_t* out16 = a.keep_out ? kept_output(a.out, n) : nullptr;
  const uint16_t* res16 = a.residual_half ? kept_copy_of(a.residual, n) : nullptr;
  uint16_t* sum16 = a.sum_copy_only ? rewritable_copy(a.y, n) : nullptr;
  LB_CHECK_MSG((!a.residual_half || converts_operands()) && (!a.sum_half || converts_operands()) &&
                   (!a.out_copy_only || out16) && (!a.sum_copy_only || (a.sum_half && sum16)),
               "residual_layernorm_forward: 16-bit residuals need 16-bit GEMMs (and kept copies for out_copy_only, "
               "y kept by its GEMM for sum_copy_only)");
  const dim3 block(32, kWarpsPerBlock);
  residual_layernorm_kernel<<<(a.rows + kWarpsPerBlock - 1) / kWarpsPerBlock, block, 0, stream()>>>(
      a, res16, out16, sum16, gemm_half_format(options_.math));
  LB_LAUNCH_CHECK();
  // Kept without a copy written in the pass (no converted operands): kept as layernorm_forward_kept does.
  if (a.keep_out && !out16) keep_gemm_operand(a.out, size_t(a.rows) * a.cols);
}

void CudaOps::layernorm_backward(const float* dy, const float* x, const float* gamma,
                                 const float* mean, const float* rstd, float* dx, float* dgamma,
                                 float* dbeta, int rows, int cols) {
  if (rows <= 0) return;
  ResidualLayerNormGrad<float> a{};  // the LayerNorm part only: no dy, dbias or dropout
  a.dout = dy, a.sum = x, a.gamma = gamma, a.mean = mean, a.rstd = rstd;
  a.dsum = dx, a.dgamma = dgamma, a.dbeta = dbeta, a.rows = rows, a.cols = cols;
  if (launch_fused_layernorm_backward<false>(a, x, dy, dx, {}, stream(), column_partials_)) return;
  const dim3 block(32, kWarpsPerBlock);
  layernorm_dx_kernel<<<(rows + kWarpsPerBlock - 1) / kWarpsPerBlock, block, 0, stream()>>>(
      dy, x, gamma, mean, rstd, dx, rows, cols);
  LB_LAUNCH_CHECK();
  launch_column_sums<2>(
      rows, cols, stream(), column_partials_,
      [=] __device__(int r, int c, float* v) {
        const float d = dy[size_t(r) * cols + c];
        v[0] = d * (x[size_t(r) * cols + c] - mean[r]) * rstd[r];
        v[1] = d;
      },
      dgamma, dbeta);
}

// One pass where copies are kept (only GEMMs read dy: its copy alone is written, as
// dropout_bias_backward_kept does) and a row fits the fused kernel in whole Philox blocks
// (cols a multiple of 4, as every BERT width); otherwise the two ops, on the sums and d(out)
// widened (or rounded) into scratch where they are 16-bit, with d(sum) rounded in fp32 between
// them and cast into its copy after.
void CudaOps::residual_layernorm_backward(const ResidualLayerNormGrad<float>& g) {
  if (g.rows <= 0) return;
  const size_t n = size_t(g.rows) * g.cols;
  const uint16_t* sum16 = g.sum_copy_only ? kept_copy_of(g.sum, n) : nullptr;
  const uint16_t* dout16 = g.grad_copy_only ? kept_copy_of(g.dout, n) : nullptr;
  LB_CHECK_MSG(!g.sum_copy_only || sum16, "residual_layernorm_backward: sum_copy_only, but the sum has no kept copy");
  LB_CHECK_MSG((!g.grad_half || converts_operands()) && (!g.grad_copy_only || (g.grad_half && dout16)),
               "residual_layernorm_backward: 16-bit gradients need 16-bit GEMMs (and d(out) kept for grad_copy_only)");
  const kern::HalfFormat format = gemm_half_format(options_.math);
  // The fused kernel's instances: 16-bit gradients beside 16-bit sums (the model's pairing),
  // fp32 gradients rounded beside fp32 sums, unrounded beside either.
  const bool pairing = g.grad_copy_only ? sum16 != nullptr : !(g.grad_half && sum16);
  const bool fused = keeps_copies() && g.cols <= 1024 && g.cols % 4 == 0 && pairing;
  if (!fused) {
    if (!sum16 && !g.grad_half) return Ops<float>::residual_layernorm_backward(g);
    const float* sum = g.sum;
    if (sum16) {
      widened_sums_.reserve(n * sizeof(float));
      float* w = static_cast<float*>(widened_sums_.get());
      widen_half(sum16, w, n, format, stream());
      sum = w;
    }
    const float* dout = g.dout;
    if (g.grad_half) {
      widened_grads_.reserve(n * sizeof(float));
      float* w = static_cast<float*>(widened_grads_.get());
      if (dout16)
        widen_half(dout16, w, n, format, stream());
      else
        round_half_into(g.dout, w, n, format, stream());
      dout = w;
    }
    layernorm_backward(dout, sum, g.gamma, g.mean, g.rstd, g.dsum, g.dgamma, g.dbeta, g.rows, g.cols);
    if (g.grad_half) round_to_gemm_half(g.dsum, n);
    dropout_bias_backward_kept(g.dsum, g.dy, g.dbias, g.rows, g.cols, g.p, g.key);
    if (g.grad_copy_only) keep_gemm_operand(g.dsum, n);  // the rounded values: an exact cast
    return;
  }
  const KeptGrad kept{kept_output(g.dy, n), format};
  bool launched = false;
  if (g.grad_copy_only)
    launched = launch_fused_layernorm_backward<true, uint16_t, uint16_t, true>(g, sum16, dout16, kept_output(g.dsum, n),
                                                                           kept, stream(), column_partials_);
  else if (sum16)
    launched = launch_fused_layernorm_backward<true>(g, sum16, g.dout, g.dsum, kept, stream(), column_partials_);
  else if (g.grad_half)
    launched = launch_fused_layernorm_backward<true, float, float, true>(g, g.sum, g.dout, g.dsum, kept, stream(),
                                                                      column_partials_);
  else
    launched = launch_fused_layernorm_backward<true>(g, g.sum, g.dout, g.dsum, kept, stream(), column_partials_);
  LB_CHECK(launched);
}

}  // namespace lansbert::cuda
