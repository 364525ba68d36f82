// Row gathers on the CPU: embedding lookups and masked-position gathers, and their
// scatter-add gradients. The scatters run in column blocks over rows in index order, so a
// row hit by several indices sums in a fixed order (no races, no thread-count dependence).
#include "cpu_ops_impl.h"

namespace lansbert::cpu {

namespace {
template <typename T>
void scatter_add_rows(const int32_t* index, const T* src, T* dst, int n, int dim) {
#pragma omp parallel for schedule(static) if (worth_threads(size_t(n) * dim))
  for (int blk = 0; blk < column_blocks(dim); ++blk) {
    int c0, c1;
    column_block(dim, blk, &c0, &c1);
    for (int i = 0; i < n; ++i) {
      T* d = dst + size_t(index[i]) * dim;
      const T* s = src + size_t(i) * dim;
      for (int c = c0; c < c1; ++c) d[c] += s[c];
    }
  }
}
}  // namespace

template <typename T>
void CpuOps<T>::embedding_forward(const int32_t* ids, const T* table, T* out, int n, int dim,
                                  bool accumulate) {
#pragma omp parallel for schedule(static) if (worth_threads(size_t(n) * dim))
  for (int i = 0; i < n; ++i) {
    const T* row = table + size_t(ids[i]) * dim;
    T* o = out + size_t(i) * dim;
    if (accumulate)
      for (int c = 0; c < dim; ++c) o[c] += row[c];
    else
      for (int c = 0; c < dim; ++c) o[c] = row[c];
  }
}

template <typename T>
void CpuOps<T>::embedding_backward(const int32_t* ids, const T* dout, T* dtable, int n, int dim) {
  scatter_add_rows(ids, dout, dtable, n, dim);
}

template <typename T>
void CpuOps<T>::gather_rows_forward(const T* src, const int32_t* index, T* dst, int n, int dim) {
  embedding_forward(index, src, dst, n, dim, false);
}

template <typename T>
void CpuOps<T>::gather_rows_backward(const T* ddst, const int32_t* index, T* dsrc, int n, int dim) {
  scatter_add_rows(index, ddst, dsrc, n, dim);
}

template class CpuOps<float>;
template class CpuOps<double>;

}  // namespace lansbert::cpu
