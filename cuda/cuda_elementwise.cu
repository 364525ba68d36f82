// Element-wise ops on the GPU: bias, residual add, activations, dropout. Each lambda body is
// the shared math of include/lansbert/kernels, as in src/cpu/cpu_elementwise.cc; the bias
// gradient is a fixed-order column sum (launch.cuh), so it is reproducible run to run.
#include "cuda_ops.cuh"
#include "dropout_map.cuh"
#include "lansbert/kernels/activations.h"
#include "lansbert/kernels/dropout.h"
#include "launch.cuh"

namespace lansbert::cuda {

void CudaOps::bias_add_forward(float* y, const float* bias, int rows, int cols) {
  const size_t n = size_t(rows) * cols;
  launch_map(n, stream(), [=] __device__(size_t i) { y[i] += bias[i % size_t(cols)]; });
}

void CudaOps::bias_add_backward(const float* dy, float* dbias, int rows, int cols) {
  launch_column_sums<1>(
      rows, cols, stream(), column_partials_,
      [=] __device__(int r, int c, float* v) { v[0] = dy[size_t(r) * cols + c]; }, dbias, nullptr);
}

// The column sums of bias_add_backward, writing dy's kept copy as they read it.
void CudaOps::bias_add_backward_kept(const float* dy, float* dbias, int rows, int cols) {
  uint16_t* h = kept_output(dy, size_t(rows) * cols);
  if (!h) return Ops<float>::bias_add_backward_kept(dy, dbias, rows, cols);
  const kern::HalfFormat format = gemm_half_format(options_.math);
  launch_column_sums<1>(
      rows, cols, stream(), column_partials_,
      [=] __device__(int r, int c, float* v) {
        const size_t i = size_t(r) * cols + c;
        h[i] = kern::float_to_half(dy[i], format);
        v[0] = dy[i];
      },
      dbias, nullptr);
}

void CudaOps::add_forward(const float* a, const float* b, float* y, size_t n) {
  launch_map(n, stream(), [=] __device__(size_t i) { y[i] = a[i] + b[i]; });
}

void CudaOps::accumulate(float* dst, const float* src, size_t n) {
  launch_map(n, stream(), [=] __device__(size_t i) { dst[i] += src[i]; });
}

void CudaOps::gelu_forward(const float* x, float* y, size_t n) {
  const kern::GeluForm form = gelu_form_;
  launch_map(n, stream(), [=] __device__(size_t i) { y[i] = kern::gelu(x[i], form); });
}

// y written only as its kept 16-bit copy where operands are converted (ops.h).
void CudaOps::gelu_forward_kept(const float* x, float* y, size_t n) {
  uint16_t* h = kept_output(y, n);
  if (!h) return Ops<float>::gelu_forward_kept(x, y, n);
  const kern::HalfFormat format = gemm_half_format(options_.math);
  const kern::GeluForm form = gelu_form_;
  launch_map(n, stream(), [=] __device__(size_t i) { h[i] = kern::float_to_half(kern::gelu(x[i], form), format); });
}

void CudaOps::gelu_backward(const float* dy, const float* x, float* dx, size_t n) {
  const kern::GeluForm form = gelu_form_;
  launch_map(n, stream(), [=] __device__(size_t i) { dx[i] = kern::gelu_grad(dy[i], x[i], form); });
}

void CudaOps::tanh_forward(const float* x, float* y, size_t n) {
  launch_map(n, stream(), [=] __device__(size_t i) { y[i] = kern::tanh_fwd(x[i]); });
}

void CudaOps::tanh_backward(const float* dy, const float* y, float* dx, size_t n) {
  launch_map(n, stream(), [=] __device__(size_t i) { dx[i] = kern::tanh_grad(dy[i], y[i]); });
}

void CudaOps::dropout_forward(const float* x, float* y, size_t n, float p, RngKey key) {
  if (p <= 0.0f) {
    if (y != x && n)
      CUDA_CHECK(cudaMemcpyAsync(y, x, n * sizeof(float), cudaMemcpyDeviceToDevice, stream()));
    return;
  }
  launch_dropout_map(n, key, stream(),
                     [=] __device__(size_t i, uint32_t bits) { y[i] = kern::dropout_scale(x[i], bits, p); });
}

// dropout_forward writing y's kept copy in the same pass (without dropout: a copy pass that
// also writes the 16-bit values).
void CudaOps::dropout_forward_kept(const float* x, float* y, size_t n, float p, RngKey key) {
  uint16_t* h = kept_output(y, n);
  if (!h) return Ops<float>::dropout_forward_kept(x, y, n, p, key);
  const kern::HalfFormat format = gemm_half_format(options_.math);
  if (p <= 0.0f) {
    launch_map(n, stream(), [=] __device__(size_t i) {
      const float v = x[i];
      y[i] = v;
      h[i] = kern::float_to_half(v, format);
    });
    return;
  }
  launch_dropout_map(n, key, stream(), [=] __device__(size_t i, uint32_t bits) {
    const float v = kern::dropout_scale(x[i], bits, p);
    y[i] = v;
    h[i] = kern::float_to_half(v, format);
  });
}

void CudaOps::dropout_backward(const float* dy, float* dx, size_t n, float p, RngKey key) {
  dropout_forward(dy, dx, n, p, key);  // the same mask and scale
}

}  // namespace lansbert::cuda
