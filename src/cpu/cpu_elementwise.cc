// Element-wise ops on the CPU: bias, residual add, activations, dropout. Each loop body is
// the shared math from include/lansbert/kernels, so the CUDA twins compute the same values.
#include <algorithm>
#include <cstring>

#include "cpu_ops_impl.h"
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
#pragma omp parallel for schedule(static) if (worth_threads(n))
  for (size_t i = 0; i < n; ++i) y[i] = kern::gelu(x[i]);
}

template <typename T>
void CpuOps<T>::gelu_backward(const T* dy, const T* x, T* dx, size_t n) {
#pragma omp parallel for schedule(static) if (worth_threads(n))
  for (size_t i = 0; i < n; ++i) dx[i] = kern::gelu_grad(dy[i], x[i]);
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

namespace {

// Philox4x32-10 for kLanes consecutive counter blocks at once, in structure-of-arrays form so
// the compiler maps the 32x32->64-bit products onto vector multiplies (the scalar generator
// costs more than the rest of dropout). Bit-identical to philox4x32_10 (tested).
constexpr int kLanes = 16;

void philox_lanes(RngKey key, uint64_t first_block, uint32_t out[4][kLanes]) {
  uint32_t c0[kLanes], c1[kLanes], c2[kLanes], c3[kLanes];
  for (int l = 0; l < kLanes; ++l) {
    const uint64_t b = first_block + uint64_t(l);
    c0[l] = uint32_t(b);
    c1[l] = uint32_t(b >> 32);
    c2[l] = key.site;
    c3[l] = key.step;
  }
  uint32_t k0 = uint32_t(key.seed), k1 = uint32_t(key.seed >> 32);
  for (int round = 0; round < 10; ++round) {
    if (round > 0) {
      k0 += 0x9E3779B9u;
      k1 += 0xBB67AE85u;
    }
    for (int l = 0; l < kLanes; ++l) {
      const uint64_t p0 = uint64_t(0xD2511F53u) * c0[l];
      const uint64_t p1 = uint64_t(0xCD9E8D57u) * c2[l];
      const uint32_t n0 = uint32_t(p1 >> 32) ^ c1[l] ^ k0;
      const uint32_t n2 = uint32_t(p0 >> 32) ^ c3[l] ^ k1;
      c1[l] = uint32_t(p1);
      c3[l] = uint32_t(p0);
      c0[l] = n0;
      c2[l] = n2;
    }
  }
  for (int l = 0; l < kLanes; ++l) {
    out[0][l] = c0[l];
    out[1][l] = c1[l];
    out[2][l] = c2[l];
    out[3][l] = c3[l];
  }
}

}  // namespace

template <typename T>
void CpuOps<T>::dropout_forward(const T* x, T* y, size_t n, float p, RngKey key) {
  if (p <= 0.0f) {
    if (y != x) std::memcpy(y, x, n * sizeof(T));
    return;
  }
  // Groups of kLanes Philox blocks = 4*kLanes elements; element e takes word e%4 of block e/4.
  constexpr size_t kGroup = 4 * kLanes;
  const size_t groups = (n + kGroup - 1) / kGroup;
#pragma omp parallel for schedule(static) if (worth_threads(n))
  for (size_t g = 0; g < groups; ++g) {
    uint32_t bits[4][kLanes];
    philox_lanes(key, g * kLanes, bits);
    const size_t begin = g * kGroup, end = std::min(n, begin + kGroup);
    for (size_t i = begin; i < end; ++i) {
      const size_t j = i - begin;
      y[i] = kern::dropout_scale(x[i], bits[j & 3][j >> 2], p);
    }
  }
}

template <typename T>
void CpuOps<T>::dropout_backward(const T* dy, T* dx, size_t n, float p, RngKey key) {
  dropout_forward(dy, dx, n, p, key);  // the same mask and scale
}

template class CpuOps<float>;
template class CpuOps<double>;

}  // namespace lansbert::cpu
