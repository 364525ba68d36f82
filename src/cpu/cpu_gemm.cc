// GEMMs on the CPU through OpenBLAS's CBLAS interface (row-major). Batched GEMMs loop over
// the two-level batch; each call may use OpenBLAS's own threads.
#include <cblas.h>

#include "cpu_ops_impl.h"

namespace lansbert::cpu {

namespace {
CBLAS_TRANSPOSE to_cblas(Trans t) { return t == Trans::kYes ? CblasTrans : CblasNoTrans; }

void blas_gemm(Trans ta, Trans tb, int m, int n, int k, float alpha, const float* a, int lda,
               const float* b, int ldb, float beta, float* c, int ldc) {
  cblas_sgemm(CblasRowMajor, to_cblas(ta), to_cblas(tb), m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
}
void blas_gemm(Trans ta, Trans tb, int m, int n, int k, double alpha, const double* a, int lda,
               const double* b, int ldb, double beta, double* c, int ldc) {
  cblas_dgemm(CblasRowMajor, to_cblas(ta), to_cblas(tb), m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
}
}  // namespace

template <typename T>
void CpuOps<T>::gemm(Trans ta, Trans tb, int m, int n, int k, T alpha, const T* a, int lda,
                     const T* b, int ldb, T beta, T* c, int ldc) {
  blas_gemm(ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
}

template <typename T>
void CpuOps<T>::gemm_batched(Trans ta, Trans tb, int m, int n, int k, T alpha, const T* a,
                             int lda, const T* b, int ldb, T beta, T* c, int ldc,
                             const GemmBatch& g) {
  // Attention GEMMs are many and small (S x S x D per head): one per thread beats splitting
  // each one. Inside the parallel region the OpenMP build of OpenBLAS runs single-threaded.
  const int count = g.outer * g.inner;
#pragma omp parallel for schedule(static) if (count > 1 && worth_threads(size_t(count) * m * n * k))
  for (int j = 0; j < count; ++j) {
    const int o = j / g.inner, i = j % g.inner;
    blas_gemm(ta, tb, m, n, k, alpha, a + o * g.a_outer + i * g.a_inner, lda,
              b + o * g.b_outer + i * g.b_inner, ldb, beta, c + o * g.c_outer + i * g.c_inner, ldc);
  }
}

template class CpuOps<float>;
template class CpuOps<double>;

template <typename T>
std::unique_ptr<Ops<T>> make_ops() {
  return std::make_unique<CpuOps<T>>();
}
template std::unique_ptr<Ops<float>> make_ops<float>();
template std::unique_ptr<Ops<double>> make_ops<double>();

}  // namespace lansbert::cpu
