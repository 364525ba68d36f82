// LayerNorm on the CPU: rows in parallel for x and dx; dgamma/dbeta reduced over rows in
// column blocks so their sums have a fixed order.
#include "cpu_ops_impl.h"
#include "lansbert/kernels/layernorm.h"

namespace lansbert::cpu {

template <typename T>
void CpuOps<T>::layernorm_forward(const T* x, const T* gamma, const T* beta, T* y, T* mean,
                                  T* rstd, int rows, int cols, T eps) {
#pragma omp parallel for schedule(static) if (worth_threads(size_t(rows) * cols))
  for (int r = 0; r < rows; ++r) {
    const T* xr = x + size_t(r) * cols;
    T* yr = y + size_t(r) * cols;
    T m, rs;
    kern::layernorm_row_stats(xr, cols, eps, &m, &rs);
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
    T sum_g = 0, sum_gx = 0;
    for (int c = 0; c < cols; ++c) {
      const T g = dyr[c] * gamma[c];
      sum_g += g;
      sum_gx += g * (xr[c] - mean[r]) * rstd[r];
    }
    const T mean_g = sum_g / T(cols), mean_gx = sum_gx / T(cols);
    for (int c = 0; c < cols; ++c) {
      const T xhat = (xr[c] - mean[r]) * rstd[r];
      dxr[c] = kern::layernorm_dx(dyr[c], gamma[c], xhat, rstd[r], mean_g, mean_gx);
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
