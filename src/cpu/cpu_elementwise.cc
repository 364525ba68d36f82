// Element-wise ops on the CPU: bias, residual add, activations, dropout. Each loop body is
// the shared math from include/lansbert/kernels, so the CUDA twins compute the same values.
#include <algorithm>
#include <cstring>

#include "cpu_ops_impl.h"
#include "philox_lanes.h"
#include "lansbert/kernels/activations.h"
#include "lansbert/kernels/dropout.h"

namespace lansbert::cpu {

template <typename T>
void CpuOps<T>::zero(T* p, size_t n) {
  std::memset(p, 0, n * sizeof(T));
}

template <typename T>
void CpuOps<T>::bias_add_forward(T* y, const T* bias, int rows, int cols) {
#pragma omp parallel for schedule(static) if (worth_threads(size_t(rows) * cols))
  for (int r = 0; r < rows; ++r)
    for (int c = 0; c < cols; ++c) y[size_t(r) * cols + c] += bias[c];
}

template <typename T>
void CpuOps<T>::bias_add_backward(const T* dy, T* dbias, int rows, int cols) {
#pragma omp parallel for schedule(static) if (worth_threads(size_t(rows) * cols))
  for (int blk = 0; blk < column_blocks(cols); ++blk) {
    int c0, c1;
    column_block(cols, blk, &c0, &c1);
    for (int r = 0; r < rows; ++r)
      for (int c = c0; c < c1; ++c) dbias[c] += dy[size_t(r) * cols + c];
  }
}

template <typename T>
void CpuOps<T>::add_forward(const T* a, const T* b, T* y, size_t n) {
#pragma omp parallel for schedule(static) if (worth_threads(n))
  for (size_t i = 0; i < n; ++i) y[i] = a[i] + b[i];
}

template <typename T>
void CpuOps<T>::accumulate(T* dst, const T* src, size_t n) {
#pragma omp parallel for schedule(static) if (worth_threads(n))
  for (size_t i = 0; i < n; ++i) dst[i] += src[i];
}

template <typename T>
void CpuOps<T>::gelu_forward(const T* x, T* y, size_t n) {
  kern::with_gelu_form(this->gelu_form_, [&](auto gelu) {
#pragma omp parallel for schedule(static) if (worth_threads(n))
    for (size_t i = 0; i < n; ++i) y[i] = gelu.fwd(x[i]);
  });
}

template <typename T>
void CpuOps<T>::gelu_backward(const T* dy, const T* x, T* dx, size_t n) {
  kern::with_gelu_form(this->gelu_form_, [&](auto gelu) {
#pragma omp parallel for schedule(static) if (worth_threads(n))
    for (size_t i = 0; i < n; ++i) dx[i] = gelu.grad(dy[i], x[i]);
  });
}

template <typename T>
void CpuOps<T>::tanh_forward(const T* x, T* y, size_t n) {
#pragma omp parallel for schedule(static) if (worth_threads(n))
  for (size_t i = 0; i < n; ++i) y[i] = kern::tanh_fwd(x[i]);
}

template <typename T>
void CpuOps<T>::tanh_backward(const T* dy, const T* y, T* dx, size_t n) {
#pragma omp parallel for schedule(static) if (worth_threads(n))
  for (size_t i = 0; i < n; ++i) dx[i] = kern::tanh_grad(dy[i], y[i]);
}

template <typename T>
void CpuOps<T>::dropout_forward(const T* x, T* y, size_t n, float p, RngKey key) {
  if (p <= 0.0f) {
    if (y != x) std::memcpy(y, x, n * sizeof(T));
    return;
  }
  for_each_dropout_bits(n, key, worth_threads(n),
                        [&](size_t i, uint32_t bits) { y[i] = kern::dropout_scale(x[i], bits, p); });
}

template <typename T>
void CpuOps<T>::dropout_backward(const T* dy, T* dx, size_t n, float p, RngKey key) {
  dropout_forward(dy, dx, n, p, key);  // the same mask and scale
}

template class CpuOps<float>;
template class CpuOps<double>;

}  // namespace lansbert::cpu
