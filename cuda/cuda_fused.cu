// Fused linear-layer epilogues on the GPU (ops.h): bias + GELU and bias + dropout + residual
// in one element-wise pass each; the GELU backward computes the activation gradient inside
// the bias-gradient column sum (launch.cuh), writing it as it goes, so the gradient is read
// once instead of twice (the dropout backward takes two passes, see there). Same shared bodies and the same expressions as the
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
  launch_map(size_t(rows) * cols, stream(), [=] __device__(size_t i) {
    const float x = pre[i] + bias[i % size_t(cols)];
    pre[i] = x;
    act[i] = kern::gelu(x);
  });
}

namespace {

// The backward epilogues, plain (h null) or with the output's kept 16-bit copy written in
// the same pass (the *_kept ops; the GELU backward then writes only the copy). Free functions: an extended __device__ lambda may not live
// in a private member. The uniform `if (h)` costs nothing next to the memory traffic.
void gelu_bias_backward_pass(const float* dact, const float* pre, float* dpre, float* dbias, int rows, int cols,
                             cudaStream_t s, DeviceBytes& partials, uint16_t* h, kern::HalfFormat format) {
  launch_column_sums<1>(
      rows, cols, s, partials,
      [=] __device__(int r, int c, float* v) {
        const size_t i = size_t(r) * cols + c;
        const float g = kern::gelu_grad(dact[i], pre[i]);
        if (h)  // only GEMMs read it from here on (ops.h): no fp32 write
          h[i] = kern::float_to_half(g, format);
        else
          dpre[i] = g;
        v[0] = g;
      },
      dbias, nullptr);
}

// Without dropout: dx = dy and its column sums in one pass. With dropout, the dropout pass
// (one Philox call per four elements) here, the column sums after it by the caller.
void dropout_pass(const float* dy, float* dx, int rows, int cols, float p, RngKey key, cudaStream_t s,
                  DeviceBytes& partials, float* dbias, uint16_t* h, kern::HalfFormat format) {
  if (p > 0.0f) {
    launch_dropout_map(size_t(rows) * cols, key, s, [=] __device__(size_t i, uint32_t bits) {
      const float g = kern::dropout_scale(dy[i], bits, p);
      dx[i] = g;
      if (h) h[i] = kern::float_to_half(g, format);
    });
    return;
  }
  launch_column_sums<1>(
      rows, cols, s, partials,
      [=] __device__(int r, int c, float* v) {
        const size_t i = size_t(r) * cols + c;
        const float g = dy[i];
        dx[i] = g;
        if (h) h[i] = kern::float_to_half(g, format);
        v[0] = g;
      },
      dbias, nullptr);
}

}  // namespace

void CudaOps::bias_gelu_backward(const float* dact, const float* pre, float* dpre, float* dbias, int rows,
                                 int cols) {
  gelu_bias_backward_pass(dact, pre, dpre, dbias, rows, cols, stream(), column_partials_, nullptr,
                          kern::HalfFormat::kBf16);
}

void CudaOps::bias_gelu_backward_kept(const float* dact, const float* pre, float* dpre, float* dbias, int rows,
                                      int cols) {
  uint16_t* h = kept_output(dpre, size_t(rows) * cols);
  if (!h) return Ops<float>::bias_gelu_backward_kept(dact, pre, dpre, dbias, rows, cols);
  gelu_bias_backward_pass(dact, pre, dpre, dbias, rows, cols, stream(), column_partials_, h,
                          gemm_half_format(options_.math));
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

// With dropout, two passes: dx = dropout(dy) with one Philox call per four elements, then the
// column sums of dx. Inside the column-sum kernel a thread owns one column, so the four
// elements of a Philox block belong to four threads and each would draw the block itself:
// four generator calls per four elements cost more than the extra read of dx. The values
// and their summation order are the same either way.
void CudaOps::dropout_bias_backward(const float* dy, float* dx, float* dbias, int rows, int cols, float p,
                                    RngKey key) {
  dropout_pass(dy, dx, rows, cols, p, key, stream(), column_partials_, dbias, nullptr, kern::HalfFormat::kBf16);
  if (p > 0.0f) bias_add_backward(dx, dbias, rows, cols);
}

void CudaOps::dropout_bias_backward_kept(const float* dy, float* dx, float* dbias, int rows, int cols, float p,
                                         RngKey key) {
  uint16_t* h = kept_output(dx, size_t(rows) * cols);
  if (!h) return Ops<float>::dropout_bias_backward_kept(dy, dx, dbias, rows, cols, p, key);
  dropout_pass(dy, dx, rows, cols, p, key, stream(), column_partials_, dbias, h, gemm_half_format(options_.math));
  if (p > 0.0f) bias_add_backward(dx, dbias, rows, cols);
}

}  // namespace lansbert::cuda
