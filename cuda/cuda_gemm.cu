// GEMMs through cuBLAS, and the backend's construction. Row-major C = op(A) op(B) is computed
// as column-major C^T = op(B)^T op(A)^T, i.e. cuBLAS is called with the operands swapped and
// the same transpose flags. The two-level batch is a loop over `outer` of strided-batched
// calls over `inner` (attention: outer = batch, inner = heads), so heads are read in place.
#include <memory>

#include "cuda_ops.cuh"
#include "launch.cuh"

namespace lansbert::cuda {

namespace {
cublasOperation_t to_cublas(Trans t) {
  return t == Trans::kYes ? CUBLAS_OP_T : CUBLAS_OP_N;
}
}  // namespace

CudaOps::CudaOps(const OpsOptions& options) : options_(options), stream_(), blas_(stream_.get()) {
  // Default math: plain fp32 unless TF32 is asked for (CUBLAS_COMPUTE_32F never uses TF32
  // by itself; the compute type below selects it).
  CUBLAS_CHECK(cublasSetMathMode(blas_.get(),
                                 options_.tf32 ? CUBLAS_TF32_TENSOR_OP_MATH : CUBLAS_DEFAULT_MATH));
}

void CudaOps::zero(float* p, size_t n) {
  if (n) CUDA_CHECK(cudaMemsetAsync(p, 0, n * sizeof(float), stream()));
}

void CudaOps::gemm(Trans ta, Trans tb, int m, int n, int k, float alpha, const float* a, int lda,
                   const float* b, int ldb, float beta, float* c, int ldc) {
  if (m <= 0 || n <= 0) return;
  const cublasComputeType_t ct = options_.tf32 ? CUBLAS_COMPUTE_32F_FAST_TF32 : CUBLAS_COMPUTE_32F;
  CUBLAS_CHECK(cublasGemmEx(blas_.get(), to_cublas(tb), to_cublas(ta), n, m, k, &alpha, b,
                            CUDA_R_32F, ldb, a, CUDA_R_32F, lda, &beta, c, CUDA_R_32F, ldc, ct,
                            CUBLAS_GEMM_DEFAULT));
}

void CudaOps::gemm_batched(Trans ta, Trans tb, int m, int n, int k, float alpha, const float* a,
                           int lda, const float* b, int ldb, float beta, float* c, int ldc,
                           const GemmBatch& g) {
  if (m <= 0 || n <= 0 || g.outer <= 0 || g.inner <= 0) return;
  const cublasComputeType_t ct = options_.tf32 ? CUBLAS_COMPUTE_32F_FAST_TF32 : CUBLAS_COMPUTE_32F;
  for (int o = 0; o < g.outer; ++o) {
    CUBLAS_CHECK(cublasGemmStridedBatchedEx(
        blas_.get(), to_cublas(tb), to_cublas(ta), n, m, k, &alpha, b + o * g.b_outer, CUDA_R_32F,
        ldb, g.b_inner, a + o * g.a_outer, CUDA_R_32F, lda, g.a_inner, &beta, c + o * g.c_outer,
        CUDA_R_32F, ldc, g.c_inner, g.inner, ct, CUBLAS_GEMM_DEFAULT));
  }
}

std::unique_ptr<Ops<float>> make_ops(const OpsOptions& options) {
  return std::make_unique<CudaOps>(options);
}

}  // namespace lansbert::cuda
