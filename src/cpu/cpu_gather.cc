// Row gathers on the CPU: embedding lookups and masked-position gathers, and their
// scatter-add gradients. The scatters sum in the order of kernels/scatter_order.h (sorted by
// row, runs cut into pieces at fixed absolute indices), the CUDA twin's order, so both give
// the same bits; column blocks run in parallel, each in that order.
#include <algorithm>
#include <numeric>
#include <vector>

#include "cpu_ops_impl.h"
#include "lansbert/kernels/scatter_order.h"

namespace lansbert::cpu {

namespace {
template <typename T>
void scatter_add_rows(const int32_t* index, const T* src, T* dst, int n, int dim) {
  if (n <= 0 || dim <= 0) return;
  std::vector<int32_t> order(n);  // source positions sorted by row, stably
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [index](int32_t a, int32_t b) { return index[a] < index[b]; });
#pragma omp parallel for schedule(static) if (worth_threads(size_t(n) * dim))
  for (int blk = 0; blk < column_blocks(dim); ++blk) {
    int c0, c1;
    column_block(dim, blk, &c0, &c1);
    std::vector<T> piece(size_t(c1 - c0));
    for (int s = 0; s < n;) {  // the run [s, e) of one row
      const int32_t row = index[order[s]];
      int e = s + 1;
      while (e < n && index[order[e]] == row) ++e;
      T* d = dst + size_t(row) * dim;
      for (int a = s; a < e;) {
        const int b = kern::scatter_piece_end(a, e);
        std::fill(piece.begin(), piece.end(), T(0));
        for (int j = a; j < b; ++j) {
          const T* x = src + size_t(order[j]) * dim;
          for (int c = c0; c < c1; ++c) piece[c - c0] += x[c];
        }
        for (int c = c0; c < c1; ++c) d[c] += piece[c - c0];
        a = b;
      }
      s = e;
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
