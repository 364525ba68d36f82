// The reference every GEMM test compares with: a triple loop in double over row-major data
// with leading dimensions. C = alpha op(A) op(B) + beta C.
#pragma once

#include "lansbert/backend/ops.h"

namespace lansbert::testing {

template <typename TA, typename TB>
void naive_gemm(Trans ta, Trans tb, int m, int n, int k, double alpha, const TA* a, int lda,
                const TB* b, int ldb, double beta, double* c, int ldc) {
  for (int i = 0; i < m; ++i)
    for (int j = 0; j < n; ++j) {
      double s = 0;
      for (int p = 0; p < k; ++p) {
        const double av = ta == Trans::kNo ? a[i * lda + p] : a[p * lda + i];
        const double bv = tb == Trans::kNo ? b[p * ldb + j] : b[j * ldb + p];
        s += av * bv;
      }
      c[i * ldc + j] = alpha * s + beta * c[i * ldc + j];
    }
}

}  // namespace lansbert::testing
