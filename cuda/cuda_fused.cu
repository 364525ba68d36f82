// Fused linear-layer epilogues on the GPU (ops.h): bias + GELU and bias + dropout + residual
// in one element-wise pass each; the GELU backward computes the activation gradient inside
// the bias-gradient column sum (launch.cuh), writing it as it goes, so the gradient is read
// once instead of twice (the dropout backward too where the width is a multiple of 4, see there). Same shared bodies and the same expressions as the
// unfused kernels in cuda_elementwise.cu, but not always the same bits: nvcc contracts a*b+c
// into an FMA (its default --fmad=true), and within one fused kernel it can contract across
// what were separate kernels (dropout's scale and the residual add), where the unfused path
// rounds in between. The parity tests compare at 1e-5 relative, not bit for bit.
#include "cuda_ops.cuh"
#include "dropout_map.cuh"
#include "lansbert/kernels/activations.h"
#include "lansbert/kernels/dropout.h"
#include "lansbert/kernels/half.h"
#include "launch.cuh"

namespace lansbert::cuda {

// pre += bias, then the GELU into act (the MLM head's transform; the FFN takes its bias in the
// GEMM's epilogue and runs gelu_forward_kept).
void CudaOps::bias_gelu_forward(float* pre, const float* bias, float* act, int rows, int cols) {
  const kern::GeluForm form = gelu_form_;
  launch_map(size_t(rows) * cols, stream(), [=] __device__(size_t i) {
    const float x = pre[i] + bias[i % size_t(cols)];
    pre[i] = x;
    act[i] = kern::gelu(x, form);
  });
}

namespace {

// The backward epilogues, plain (h null) or with the output's kept 16-bit copy written in
// the same pass (the *_kept ops; the GELU backward then writes only the copy). Free functions: an extended __device__ lambda may not live
// in a private member. The uniform `if (h)` costs nothing next to the memory traffic.
void gelu_bias_backward_pass(const float* dact, const float* pre, float* dpre, float* dbias, int rows, int cols,
                             cudaStream_t s, DeviceBytes& partials, uint16_t* h, kern::HalfFormat format,
                             kern::GeluForm form) {
  launch_column_sums<1>(
      rows, cols, s, partials,
      [=] __device__(int r, int c, float* v) {
        const size_t i = size_t(r) * cols + c;
        const float g = kern::gelu_grad(dact[i], pre[i], form);
        if (h)  // only GEMMs read it from here on (ops.h): no fp32 write
          h[i] = kern::float_to_half(g, format);
        else
          dpre[i] = g;
        v[0] = g;
      },
      dbias, nullptr);
}

// dx = dropout(dy) and its column sums in one pass where cols is a multiple of 4: thread x of
// a block owns the four columns 4 x .. 4 x + 3 of a 128-column tile, which are one Philox
// block in every row, so one generator call serves its four elements (a thread per column
// would make four calls per block); thread y takes rows y, y + 32, ... of the block's split.
// dx written in fp32 and/or as the kept copy h (either may be null). Partial sums as
// column_partials_kernel's, finished by column_finish_kernel.
__global__ void __launch_bounds__(kColTile* kColTile)
    dropout_column_partials_kernel(int rows, int cols, const float* dy, float* dx, uint16_t* h,
                                   kern::HalfFormat format, float p, RngKey key, float* partial) {
  __shared__ float part[4][kColTile][kColTile + 1];
  const int c0 = (blockIdx.x * kColTile + threadIdx.x) * 4;
  const int split = blockIdx.y, splits = gridDim.y;
  const int r0 = static_cast<int>(int64_t(rows) * split / splits);
  const int r1 = static_cast<int>(int64_t(rows) * (split + 1) / splits);
  const uint64_t n = uint64_t(rows) * cols;
  float acc[4] = {0.f, 0.f, 0.f, 0.f};
  if (c0 < cols)
    for (int r = r0 + threadIdx.y; r < r1; r += kColTile) {
      const uint64_t i0 = uint64_t(r) * cols + c0;
      kern::for_dropout_block(key, i0 / 4, n, [&](uint64_t i, uint32_t bits) {
        const float g = kern::dropout_scale(dy[i], bits, p);
        if (dx) dx[i] = g;
        if (h) h[i] = kern::float_to_half(g, format);
        // A switch, not acc[i - i0]: the compiler cannot see that i - i0 is the block's
        // element t, and a run-time index would put acc in local memory.
        switch (i - i0) {
          case 0: acc[0] += g; break;
          case 1: acc[1] += g; break;
          case 2: acc[2] += g; break;
          default: acc[3] += g; break;
        }
      });
    }
  for (int t = 0; t < 4; ++t) part[t][threadIdx.y][threadIdx.x] = acc[t];
  __syncthreads();
  if (threadIdx.y == 0 && c0 < cols)
    for (int t = 0; t < 4; ++t) {
      float sum = 0;
      for (int y = 0; y < kColTile; ++y) sum += part[t][y][threadIdx.x];
      partial[size_t(split) * cols + c0 + t] = sum;
    }
}

// Without dropout: dx = dy and its column sums in one pass; with dropout and cols a multiple
// of 4 the same (above). Otherwise the dropout pass (one Philox call per four elements) here,
// and the column sums after it by the caller: returns whether dbias was summed. dx may be null
// (only the copy h written) except where it returns false.
bool dropout_pass(const float* dy, float* dx, int rows, int cols, float p, RngKey key, cudaStream_t s,
                  DeviceBytes& partials, float* dbias, uint16_t* h, kern::HalfFormat format) {
  if (p > 0.0f && cols % 4 == 0) {
    if (rows <= 0 || cols <= 0) return true;
    const int splits = column_splits(rows);
    partials.reserve(size_t(splits) * cols * sizeof(float));
    float* partial = static_cast<float*>(partials.get());
    const dim3 grid((cols / 4 + kColTile - 1) / kColTile, splits), block(kColTile, kColTile);
    dropout_column_partials_kernel<<<grid, block, 0, s>>>(rows, cols, dy, dx, h, format, p, key, partial);
    LB_LAUNCH_CHECK();
    column_finish_kernel<1><<<(cols + kThreads - 1) / kThreads, kThreads, 0, s>>>(cols, splits, partial, dbias, nullptr);
    LB_LAUNCH_CHECK();
    return true;
  }
  if (p > 0.0f) {
    launch_dropout_map(size_t(rows) * cols, key, s, [=] __device__(size_t i, uint32_t bits) {
      const float g = kern::dropout_scale(dy[i], bits, p);
      dx[i] = g;
      if (h) h[i] = kern::float_to_half(g, format);
    });
    return false;
  }
  launch_column_sums<1>(
      rows, cols, s, partials,
      [=] __device__(int r, int c, float* v) {
        const size_t i = size_t(r) * cols + c;
        const float g = dy[i];
        if (dx) dx[i] = g;
        if (h) h[i] = kern::float_to_half(g, format);
        v[0] = g;
      },
      dbias, nullptr);
  return true;
}

}  // namespace

void CudaOps::bias_gelu_backward(const float* dact, const float* pre, float* dpre, float* dbias, int rows,
                                 int cols) {
  gelu_bias_backward_pass(dact, pre, dpre, dbias, rows, cols, stream(), column_partials_, nullptr,
                          kern::HalfFormat::kBf16, gelu_form_);
}

void CudaOps::bias_gelu_backward_kept(const float* dact, const float* pre, float* dpre, float* dbias, int rows,
                                      int cols) {
  uint16_t* h = kept_output(dpre, size_t(rows) * cols);
  if (!h) return Ops<float>::bias_gelu_backward_kept(dact, pre, dpre, dbias, rows, cols);
  gelu_bias_backward_pass(dact, pre, dpre, dbias, rows, cols, stream(), column_partials_, h,
                          gemm_half_format(options_.math), gelu_form_);
}

void CudaOps::bias_dropout_residual_forward(float* y, const float* bias, const float* residual, int rows,
                                            int cols, float p, RngKey key) {
  const size_t n = size_t(rows) * cols;
  if (p <= 0.0f) {
    launch_map(n, stream(), [=] __device__(size_t i) { y[i] = (y[i] + bias[i % size_t(cols)]) + residual[i]; });
    return;
  }
  launch_dropout_map(n, key, stream(), [=] __device__(size_t i, uint32_t bits) {
    y[i] = kern::dropout_scale(y[i] + bias[i % size_t(cols)], bits, p) + residual[i];
  });
}

// One pass where cols is a multiple of 4 (every BERT hidden size): the dropout and the column
// sums together, a thread per four columns (dropout_column_partials_kernel). Otherwise two:
// dx = dropout(dy) with one Philox call per four elements, then the column sums of dx (inside
// the generic column-sum kernel a thread owns one column, so the four elements of a Philox
// block would belong to four threads, each drawing the block itself).
void CudaOps::dropout_bias_backward(const float* dy, float* dx, float* dbias, int rows, int cols, float p,
                                    RngKey key) {
  if (!dropout_pass(dy, dx, rows, cols, p, key, stream(), column_partials_, dbias, nullptr, kern::HalfFormat::kBf16))
    bias_add_backward(dx, dbias, rows, cols);
}

// Only GEMMs read dx after this (ops.h): in one pass its copy alone is written, no fp32.
void CudaOps::dropout_bias_backward_kept(const float* dy, float* dx, float* dbias, int rows, int cols, float p,
                                         RngKey key) {
  uint16_t* h = kept_output(dx, size_t(rows) * cols);
  if (!h) return Ops<float>::dropout_bias_backward_kept(dy, dx, dbias, rows, cols, p, key);
  // Where the pass cannot sum (dropout, cols not a multiple of 4), dx is the sums' fp32 scratch.
  const bool two_passes = p > 0.0f && cols % 4 != 0;
  if (!dropout_pass(dy, two_passes ? dx : nullptr, rows, cols, p, key, stream(), column_partials_, dbias, h,
                    gemm_half_format(options_.math)))
    bias_add_backward(dx, dbias, rows, cols);
}

}  // namespace lansbert::cuda
