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

void CudaOps::bias_gelu_forward(float* pre, const float* bias, float* act, int rows, int cols) {
  const size_t n = size_t(rows) * cols;
  launch_map(n, stream(), [=] __device__(size_t i) {
    const float x = pre[i] + bias[i % size_t(cols)];
    pre[i] = x;
    act[i] = kern::gelu(x);
  });
}

// act written only as its kept 16-bit copy where operands are converted (ops.h).
void CudaOps::bias_gelu_forward_kept(float* pre, const float* bias, float* act, int rows, int cols) {
  const size_t n = size_t(rows) * cols;
  uint16_t* out = kept_output(act, n);
  if (!out) return Ops<float>::bias_gelu_forward_kept(pre, bias, act, rows, cols);
  const kern::HalfFormat format = gemm_half_format(options_.math);
  launch_map(n, stream(), [=] __device__(size_t i) {
    const float x = pre[i] + bias[i % size_t(cols)];
    pre[i] = x;
    out[i] = kern::float_to_half(kern::gelu(x), format);
  });
}

void CudaOps::bias_gelu_backward(const float* dact, const float* pre, float* dpre, float* dbias, int rows,
                                 int cols) {
  launch_column_sums<1>(
      rows, cols, stream(), column_partials_,
      [=] __device__(int r, int c, float* v) {
        const size_t i = size_t(r) * cols + c;
        const float g = kern::gelu_grad(dact[i], pre[i]);
        dpre[i] = g;
        v[0] = g;
      },
      dbias, nullptr);
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
  if (p > 0.0f) {
    dropout_forward(dy, dx, size_t(rows) * cols, p, key);  // dropout's backward is its forward
    bias_add_backward(dx, dbias, rows, cols);
    return;
  }
  launch_column_sums<1>(
      rows, cols, stream(), column_partials_,
      [=] __device__(int r, int c, float* v) {
        const size_t i = size_t(r) * cols + c;
        dx[i] = dy[i];
        v[0] = dy[i];
      },
      dbias, nullptr);
}

// The kept variants (ops.h): dx (dpre) and its 16-bit copy written in the same pass.
void CudaOps::dropout_bias_backward_kept(const float* dy, float* dx, float* dbias, int rows, int cols, float p,
                                         RngKey key) {
  const size_t n = size_t(rows) * cols;
  uint16_t* h = kept_output(dx, n);
  if (!h) return Ops<float>::dropout_bias_backward_kept(dy, dx, dbias, rows, cols, p, key);
  const kern::HalfFormat format = gemm_half_format(options_.math);
  if (p > 0.0f) {
    launch_dropout_map(n, key, stream(), [=] __device__(size_t i, uint32_t bits) {
      const float g = kern::dropout_scale(dy[i], bits, p);
      dx[i] = g;
      h[i] = kern::float_to_half(g, format);
    });
    bias_add_backward(dx, dbias, rows, cols);
    return;
  }
  launch_column_sums<1>(
      rows, cols, stream(), column_partials_,
      [=] __device__(int r, int c, float* v) {
        const size_t i = size_t(r) * cols + c;
        const float g = dy[i];
        dx[i] = g;
        h[i] = kern::float_to_half(g, format);
        v[0] = g;
      },
      dbias, nullptr);
}

void CudaOps::bias_gelu_backward_kept(const float* dact, const float* pre, float* dpre, float* dbias, int rows,
                                      int cols) {
  uint16_t* h = kept_output(dpre, size_t(rows) * cols);
  if (!h) return Ops<float>::bias_gelu_backward_kept(dact, pre, dpre, dbias, rows, cols);
  const kern::HalfFormat format = gemm_half_format(options_.math);
  launch_column_sums<1>(
      rows, cols, stream(), column_partials_,
      [=] __device__(int r, int c, float* v) {
        const size_t i = size_t(r) * cols + c;
        const float g = kern::gelu_grad(dact[i], pre[i]);
        dpre[i] = g;
        h[i] = kern::float_to_half(g, format);
        v[0] = g;
      },
      dbias, nullptr);
}

}  // namespace lansbert::cuda
