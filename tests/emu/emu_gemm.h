// What the emulator's cuBLAS (emu_blas.cc) and cuBLASLt (emu_blaslt.cc) share: the GEMM
// loop, the type and operation rules both libraries document, and handle creation.
//
// Numerics (one loop, run_gemm): each input is converted to fp32 (16-bit types exactly), then
// rounded as the compute type allows (FAST_16BF: to bf16, FAST_16F: to fp16, FAST_TF32: to
// 10 mantissa bits, all round-to-nearest-even; 32F: kept). Each product is formed in fp32 and
// accumulated in double in increasing k order, and the sum rounded once to fp32: a GPU's fp32
// accumulation (any order, any split-K) lands within a few fp32 ulps of that. The epilogue
// (alpha, beta * C, bias) is computed in fp32, the scale type, then rounded once to the
// output type. What it cannot show: the GPU's own summation order and its rounding noise.
//
// As documented for both libraries: C is not read when beta == 0 (fresh emulator memory is
// NaN); following reference BLAS, A and B are not read when alpha == 0 or k == 0. Type
// combinations are the documented ones for 32F compute: A/B fp32 -> C fp32, A/B bf16 or fp16
// -> C of that type or fp32; the FAST_* compute types take fp32 A/B/C only. Anything else is
// CUBLAS_STATUS_NOT_SUPPORTED, as CUBLAS_OP_C is (lansbert uses N and T only; real cuBLAS
// would treat C as T for real types, which the emulator does not need to copy).
#pragma once

#include <cublasLt.h>
#include <cublas_v2.h>

#include <cstddef>
#include <cstdint>

namespace emu::blas {

constexpr cublasStatus_t kOk = CUBLAS_STATUS_SUCCESS, kBad = CUBLAS_STATUS_INVALID_VALUE,
                         kUnsupported = CUBLAS_STATUS_NOT_SUPPORTED;

bool is_half(cudaDataType_t t);
size_t type_bytes(cudaDataType_t t);
// The documented (compute, A/B, C) combinations this emulator computes (see the top comment).
bool types_supported(int ct, cudaDataType_t a, cudaDataType_t b, cudaDataType_t c);
// N and T are computed; C (conjugate) is refused; anything else is not an operation.
cublasStatus_t check_op(int op);

struct Mat {
  const void* p = nullptr;
  cudaDataType_t type = CUDA_R_32F;
  int64_t ld = 0;
};

// What follows the sum in cuBLASLt's GELU epilogues (cublasLt.h): kGeluAux stores the sum in
// aux and D = gelu(sum); kDGelu stores D = gelu'(aux) * sum and, into `bias`, D's row sums
// (its bias gradient). Their GELU is the tanh approximation, evaluated here by the textbook
// formula with tanhf (another evaluation than lansbert's kernels: the checks must allow for it).
enum class Epilogue { kNone, kGeluAux, kDGelu };

// D = alpha * op(A) op(B) + beta * C (+ bias[row]), column-major, D m x n, op(A) m x k; then
// the epilogue, with aux (D's type, m x n, leading dimension aux_ld).
struct Gemm {
  bool ta = false, tb = false;
  int64_t m = 0, n = 0, k = 0;
  float alpha = 1, beta = 0;
  Mat a, b, c;
  void* d = nullptr;
  cudaDataType_t d_type = CUDA_R_32F;
  int64_t ldd = 0;
  const void* bias = nullptr;
  cudaDataType_t bias_type = CUDA_R_32F;
  cublasComputeType_t compute = CUBLAS_COMPUTE_32F;
  Epilogue epilogue = Epilogue::kNone;
  void* aux = nullptr;
  int64_t aux_ld = 0;
};

// Runs the GEMM now (callers queue it on a stream).
void run_gemm(const Gemm& g);
// Every operand pointer must be device or pinned memory (emu_state.h); null ones are skipped.
void check_operands(const char* what, const void* a, const void* b, const void* c, const void* d,
                    const void* bias = nullptr);

template <typename T>
cublasStatus_t create(T** out) {
  if (!out) return kBad;
  *out = new T{};
  return kOk;
}
template <typename T>
cublasStatus_t destroy(T* handle) {
  if (!handle) return CUBLAS_STATUS_NOT_INITIALIZED;
  delete handle;
  return kOk;
}

}  // namespace emu::blas
