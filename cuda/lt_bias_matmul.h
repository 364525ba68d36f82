// LtBiasMatmul: row-major C = op(A) op(B) + bias (per column of C) through cuBLASLt's bias
// epilogue, for CudaOps::gemm_bias (a linear layer's forward without a second pass over C);
// and the FFN's two GELU epilogues (CudaOps::gemm_bias_gelu_half, gemm_dgelu_bias_half):
//   kGeluAuxBias  aux = op(A) op(B) + bias, C = gelu(aux)  (aux 16-bit, [m, n] like C)
//   kDGeluBgrad   C = gelu'(aux) * op(A) op(B), bias = column sums of C  (aux read; bias fp32,
//                 written, not accumulated)
// cuBLASLt's GELU is its own (the tanh approximation, cublasLt.h names no other form).
// Row-major C is computed as column-major C^T = op(B)^T op(A)^T, as in cuda_gemm.cu; the
// bias then runs along the column-major rows, i.e. along our n (the output features).
//
// The algorithm heuristic is host work of tens of microseconds, so a plan (descriptors and
// chosen algorithm) is made once per shape, type and pointer alignment and reused; only the
// bias pointer is set per call. A call for which cuBLASLt offers no algorithm (a type
// combination it does not support, a bias not 16-byte aligned) returns false with nothing
// queued, and the caller runs the GEMM and the bias add itself.
#pragma once

#include <cublasLt.h>

#include <map>
#include <memory>
#include <tuple>

#include "cuda_raii.cuh"
#include "lansbert/backend/ops.h"

namespace lansbert::cuda {

class LtBiasMatmul {
 public:
  enum class Epilogue { kBias, kGeluAuxBias, kDGeluBgrad };
  struct Call {
    Epilogue epilogue = Epilogue::kBias;
    Trans ta = Trans::kNo, tb = Trans::kNo;
    int m = 0, n = 0, k = 0;
    const void* a = nullptr;
    cudaDataType_t a_type = CUDA_R_32F;
    int lda = 0;
    const void* b = nullptr;
    cudaDataType_t b_type = CUDA_R_32F;
    int ldb = 0;
    const float* bias = nullptr;  // fp32 whatever c's type; kDGeluBgrad writes it
    void* aux = nullptr;          // the GELU epilogues': c's 16-bit type, leading dimension ldc
    void* c = nullptr;
    cudaDataType_t c_type = CUDA_R_32F;  // or a 16-bit type: the sum rounded once (CudaOps::gemm_bias_kept)
    int ldc = 0;
    cublasComputeType_t compute = CUBLAS_COMPUTE_32F;
  };

  LtBiasMatmul();
  ~LtBiasMatmul();
  LtBiasMatmul(const LtBiasMatmul&) = delete;
  LtBiasMatmul& operator=(const LtBiasMatmul&) = delete;

  // Queues the fused GEMM on `stream` and returns true, or returns false (nothing queued).
  bool run(const Call& call, cudaStream_t stream);

 private:
  struct Plan;
  // (epilogue, ta, tb, m, n, k, lda, ldb, ldc, a_type, b_type, c_type, compute, alignments of a,
  // b, c, bias, aux)
  using Key = std::tuple<int, int, int, int, int, int, int, int, int, int, int, int, int, int, int, int, int, int>;

  CublasLtHandle handle_;
  std::map<Key, std::unique_ptr<Plan>> plans_;  // a null plan: no algorithm for that key
};

}  // namespace lansbert::cuda
