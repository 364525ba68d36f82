// Mixed-precision GEMM through cuBLASLt: bf16 or fp16 operands, fp32 accumulation (compute
// type 32F) and fp32 output, optionally with the bias epilogue. Row-major C = op(A) op(B) is
// computed as column-major C^T = op(B)^T op(A)^T, as in cuda_gemm.cu; the bias then runs
// along the column-major rows, i.e. along our n. The handle and its 32 MiB workspace are
// created on first use and live for the process.
#include <cublasLt.h>

#include "cuda_api.h"
#include "cuda_raii.cuh"

namespace lansbert::cuda {

namespace {

CublasLtHandle& lt_handle() {
  static CublasLtHandle h;
  return h;
}

// RAII for the per-call descriptors.
struct MatmulDesc {
  cublasLtMatmulDesc_t d = nullptr;
  MatmulDesc() { CUBLAS_CHECK(cublasLtMatmulDescCreate(&d, CUBLAS_COMPUTE_32F, CUDA_R_32F)); }
  ~MatmulDesc() { cublasLtMatmulDescDestroy(d); }
  template <typename V>
  void set(cublasLtMatmulDescAttributes_t a, const V& v) {
    CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(d, a, &v, sizeof v));
  }
};
struct Layout {
  cublasLtMatrixLayout_t l = nullptr;
  Layout(cudaDataType_t t, int rows, int cols, int ld) {
    CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&l, t, rows, cols, ld));
  }
  ~Layout() { cublasLtMatrixLayoutDestroy(l); }
};
struct Preference {
  cublasLtMatmulPreference_t p = nullptr;
  explicit Preference(size_t workspace) {
    CUBLAS_CHECK(cublasLtMatmulPreferenceCreate(&p));
    CUBLAS_CHECK(cublasLtMatmulPreferenceSetAttribute(p, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES,
                                                      &workspace, sizeof workspace));
  }
  ~Preference() { cublasLtMatmulPreferenceDestroy(p); }
};

cublasOperation_t to_op(Trans t) {
  return t == Trans::kYes ? CUBLAS_OP_T : CUBLAS_OP_N;
}

}  // namespace

void gemm_half(HalfType type, Trans ta, Trans tb, int m, int n, int k, float alpha,
               const uint16_t* a, int lda, const uint16_t* b, int ldb, float beta, float* c,
               int ldc, const float* bias, LtEpilogue epilogue) {
  if (m <= 0 || n <= 0) return;
  CublasLtHandle& h = lt_handle();
  const cudaDataType_t t = type == HalfType::kBf16 ? CUDA_R_16BF : CUDA_R_16F;
  // Column-major view: D^T [n, m] = op(B^T) [n, k] * op(A^T) [k, m].
  MatmulDesc desc;
  desc.set(CUBLASLT_MATMUL_DESC_TRANSA, to_op(tb));
  desc.set(CUBLASLT_MATMUL_DESC_TRANSB, to_op(ta));
  if (epilogue == LtEpilogue::kBias) {
    LB_CHECK_MSG(bias != nullptr, "LtEpilogue::kBias needs a bias vector");
    desc.set(CUBLASLT_MATMUL_DESC_EPILOGUE, CUBLASLT_EPILOGUE_BIAS);
    desc.set(CUBLASLT_MATMUL_DESC_BIAS_POINTER, bias);
  }
  // Stored shapes (column-major) of the swapped operands.
  Layout la(t, tb == Trans::kNo ? n : k, tb == Trans::kNo ? k : n, ldb);
  Layout lb(t, ta == Trans::kNo ? k : m, ta == Trans::kNo ? m : k, lda);
  Layout lc(CUDA_R_32F, n, m, ldc);
  Preference pref(h.workspace_bytes());
  cublasLtMatmulHeuristicResult_t result{};
  int found = 0;
  CUBLAS_CHECK(cublasLtMatmulAlgoGetHeuristic(h.get(), desc.d, la.l, lb.l, lc.l, lc.l, pref.p, 1,
                                              &result, &found));
  LB_CHECK_MSG(found > 0, "cuBLASLt found no algorithm for this mixed-precision GEMM");
  CUBLAS_CHECK(cublasLtMatmul(h.get(), desc.d, &alpha, b, la.l, a, lb.l, &beta, c, lc.l, c, lc.l,
                              &result.algo, h.workspace(), h.workspace_bytes(), cudaStreamLegacy));
}

}  // namespace lansbert::cuda
