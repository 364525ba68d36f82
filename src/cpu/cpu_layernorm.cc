// LayerNorm on the CPU: rows in parallel for x and dx, each row's sums in vectorisable lanes
// (row_reduce.h); dgamma/dbeta reduced over rows in column blocks so their sums have a fixed
// order.
#include "cpu_ops_impl.h"
#include "lansbert/kernels/layernorm.h"
#include "row_reduce.h"

namespace lansbert::cpu {

template <typename T>
void CpuOps<T>::layernorm_forward(const T* x, const T* gamma, const T* beta, T* y, T* mean,
                                  T* rstd, int rows, int cols, T eps) {
#pragma omp parallel for schedule(static) if (worth_threads(size_t(rows) * cols))
  for (int r = 0; r < rows; ++r) {
    const T* xr = x + size_t(r) * cols;
    T* yr = y + size_t(r) * cols;
    // Two passes: the mean, then the variance around it.
    const T m = row_sum<T>(cols, [&](int c) { return xr[c]; }) / T(cols);
    const T var = row_sum<T>(cols, [&](int c) { return (xr[c] - m) * (xr[c] - m); }) / T(cols);
    const T rs = kern::layernorm_rstd(var, eps);
    for (int c = 0; c < cols; ++c) yr[c] = kern::layernorm_out(xr[c], m, rs, gamma[c], beta[c]);
    mean[r] = m;
    rstd[r] = rs;
  }
}

template <typename T>
void CpuOps<T>::layernorm_backward(const T* dy, const T* x, const T* gamma, const T* mean,
                                   const T* rstd, T* dx, T* dgamma, T* dbeta, int rows, int cols) {
#pragma omp parallel for schedule(static) if (worth_threads(size_t(rows) * cols))
  for (int r = 0; r < rows; ++r) {
    const T* dyr = dy + size_t(r) * cols;
    const T* xr = x + size_t(r) * cols;
    T* dxr = dx + size_t(r) * cols;
    const T mr = mean[r], rr = rstd[r];
    const T sum_g = row_sum<T>(cols, [&](int c) { return dyr[c] * gamma[c]; });
    const T sum_gx = row_sum<T>(cols, [&](int c) { return dyr[c] * gamma[c] * (xr[c] - mr) * rr; });
    const T mean_g = sum_g / T(cols), mean_gx = sum_gx / T(cols);
    for (int c = 0; c < cols; ++c) {
      const T xhat = (xr[c] - mr) * rr;
      dxr[c] = kern::layernorm_dx(dyr[c], gamma[c], xhat, rr, mean_g, mean_gx);
    }
  }
#pragma omp parallel for schedule(static) if (worth_threads(size_t(rows) * cols))
  for (int blk = 0; blk < column_blocks(cols); ++blk) {
    int c0, c1;
    column_block(cols, blk, &c0, &c1);
    for (int r = 0; r < rows; ++r)
      for (int c = c0; c < c1; ++c) {
        const T d = dy[size_t(r) * cols + c];
        dgamma[c] += d * (x[size_t(r) * cols + c] - mean[r]) * rstd[r];
        dbeta[c] += d;
      }
  }
}

template class CpuOps<float>;
template class CpuOps<double>;

}  // namespace lansbert::cpu
