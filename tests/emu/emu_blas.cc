// The CUDA emulator's host stand-in for cuBLAS, for tests only: it defines, with the
// signatures <cublas_v2.h> declares, the cuBLAS entry points lansbert's CUDA backend calls, so
// the backend links against this file instead of libcublas (cuBLASLt: emu_blaslt.cc). "Device
// memory" is host memory here; each call checks its arguments and reads its host scalars at
// once, and queues the arithmetic on its stream (emu_streams.h); workspaces are accepted and
// ignored. It is a reference, not a fast path: sizes in the emulated tests are tiny. The
// numerics are emu_gemm.h's.
#include <cublas_v2.h>

#include <cstdint>
#include <string>

#include "emu_gemm.h"
#include "emu_state.h"
#include "emu_streams.h"

using namespace emu::blas;

// The handle the header leaves opaque. Nothing is kept in it but what the calls store.
struct cublasContext {
  cudaStream_t stream = nullptr;
  cublasMath_t math = CUBLAS_DEFAULT_MATH;  // stored: math modes only permit reduced precision
};

namespace {

// The cublas*GemmEx argument checks: bad sizes and leading dimensions are INVALID_VALUE and
// type combinations outside the table NOT_SUPPORTED, as the cuBLAS documentation lists them.
cublasStatus_t make_gemm(cublasHandle_t h, cublasOperation_t ta, cublasOperation_t tb, int m, int n,
                         int k, const void* alpha, cudaDataType_t at, int lda, cudaDataType_t bt,
                         int ldb, const void* beta, cudaDataType_t ct, int ldc, int batch,
                         cublasComputeType_t compute, Gemm* g) {
  if (!h) return CUBLAS_STATUS_NOT_INITIALIZED;
  if (cublasStatus_t st = check_op(ta); st != kOk) return st;
  if (cublasStatus_t st = check_op(tb); st != kOk) return st;
  const bool na = ta == CUBLAS_OP_N, nb = tb == CUBLAS_OP_N;
  if (m < 0 || n < 0 || k < 0 || batch < 0 || !alpha || !beta) return kBad;
  if (lda < std::max(1, na ? m : k) || ldb < std::max(1, nb ? k : n) || ldc < std::max(1, m))
    return kBad;
  if (!types_supported(compute, at, bt, ct)) return kUnsupported;
  *g = Gemm{};
  g->ta = !na, g->tb = !nb, g->m = m, g->n = n, g->k = k;
  g->alpha = *static_cast<const float*>(alpha), g->beta = *static_cast<const float*>(beta);
  g->a = {nullptr, at, lda}, g->b = {nullptr, bt, ldb}, g->c = {nullptr, ct, ldc};
  g->d_type = ct, g->ldd = ldc, g->compute = compute;
  return kOk;
}

// Queues the GEMM on the stream (emu_streams.h): it runs when its results are waited for.
void run_on(Gemm g, const void* a, const void* b, void* c, cudaStream_t s) {
  check_operands("cuBLAS GEMM", a, b, c, c);
  g.a.p = a, g.b.p = b, g.c.p = c, g.d = c;
  if (g.m > 0 && g.n > 0) emu::enqueue(s, [g] { run_gemm(g); });
}

// The enumerator's own spelling, which is what the real cublasGetStatusName returns.
const char* status_name(cublasStatus_t st) {
#define EMU_NAME(s) \
  if (st == s) return #s
  EMU_NAME(CUBLAS_STATUS_SUCCESS);
  EMU_NAME(CUBLAS_STATUS_NOT_INITIALIZED);
  EMU_NAME(CUBLAS_STATUS_ALLOC_FAILED);
  EMU_NAME(CUBLAS_STATUS_INVALID_VALUE);
  EMU_NAME(CUBLAS_STATUS_ARCH_MISMATCH);
  EMU_NAME(CUBLAS_STATUS_MAPPING_ERROR);
  EMU_NAME(CUBLAS_STATUS_EXECUTION_FAILED);
  EMU_NAME(CUBLAS_STATUS_INTERNAL_ERROR);
  EMU_NAME(CUBLAS_STATUS_NOT_SUPPORTED);
  EMU_NAME(CUBLAS_STATUS_LICENSE_ERROR);
#undef EMU_NAME
  return "CUBLAS_STATUS_UNKNOWN";
}

}  // namespace

extern "C" {

// --- cuBLAS ---------------------------------------------------------------------------------
cublasStatus_t cublasCreate_v2(cublasHandle_t* handle) {
  return create(handle);
}
cublasStatus_t cublasDestroy_v2(cublasHandle_t handle) {
  return destroy(handle);
}

cublasStatus_t cublasSetStream_v2(cublasHandle_t handle, cudaStream_t stream) {
  if (!handle) return CUBLAS_STATUS_NOT_INITIALIZED;
  handle->stream = stream;  // the GEMMs queue their work here
  return kOk;
}

cublasStatus_t cublasSetWorkspace_v2(cublasHandle_t handle, void*, size_t) {
  return handle ? kOk : CUBLAS_STATUS_NOT_INITIALIZED;  // no workspace needed
}

cublasStatus_t cublasSetMathMode(cublasHandle_t handle, cublasMath_t mode) {
  if (!handle) return CUBLAS_STATUS_NOT_INITIALIZED;
  handle->math = mode;
  return kOk;
}

const char* cublasGetStatusName(cublasStatus_t status) {
  return status_name(status);
}
// The real library describes each status in words; lansbert only prints it.
const char* cublasGetStatusString(cublasStatus_t status) {
  return status_name(status);
}

cublasStatus_t cublasGemmEx(cublasHandle_t handle, cublasOperation_t transa,
                            cublasOperation_t transb, int m, int n, int k, const void* alpha,
                            const void* A, cudaDataType Atype, int lda, const void* B,
                            cudaDataType Btype, int ldb, const void* beta, void* C,
                            cudaDataType Ctype, int ldc, cublasComputeType_t computeType,
                            cublasGemmAlgo_t) {
  Gemm g;
  const cublasStatus_t st = make_gemm(handle, transa, transb, m, n, k, alpha, Atype, lda, Btype,
                                      ldb, beta, Ctype, ldc, 1, computeType, &g);
  if (st == kOk) run_on(g, A, B, C, handle->stream);
  return st;
}

cublasStatus_t cublasGemmStridedBatchedEx(cublasHandle_t handle, cublasOperation_t transa,
                                          cublasOperation_t transb, int m, int n, int k,
                                          const void* alpha, const void* A, cudaDataType Atype,
                                          int lda, long long int strideA, const void* B,
                                          cudaDataType Btype, int ldb, long long int strideB,
                                          const void* beta, void* C, cudaDataType Ctype, int ldc,
                                          long long int strideC, int batchCount,
                                          cublasComputeType_t computeType, cublasGemmAlgo_t) {
  Gemm g;
  const cublasStatus_t st = make_gemm(handle, transa, transb, m, n, k, alpha, Atype, lda, Btype,
                                      ldb, beta, Ctype, ldc, batchCount, computeType, &g);
  // Strides are in elements of each matrix's own type.
  for (int i = 0; st == kOk && i < batchCount; ++i)
    run_on(g, static_cast<const char*>(A) + i * strideA * int64_t(type_bytes(Atype)),
           static_cast<const char*>(B) + i * strideB * int64_t(type_bytes(Btype)),
           static_cast<char*>(C) + i * strideC * int64_t(type_bytes(Ctype)), handle->stream);
  return st;
}

cublasStatus_t cublasGemmBatchedEx(cublasHandle_t handle, cublasOperation_t transa,
                                   cublasOperation_t transb, int m, int n, int k, const void* alpha,
                                   const void* const Aarray[], cudaDataType Atype, int lda,
                                   const void* const Barray[], cudaDataType Btype, int ldb,
                                   const void* beta, void* const Carray[], cudaDataType Ctype,
                                   int ldc, int batchCount, cublasComputeType_t computeType,
                                   cublasGemmAlgo_t) {
  Gemm g;
  const cublasStatus_t st = make_gemm(handle, transa, transb, m, n, k, alpha, Atype, lda, Btype,
                                      ldb, beta, Ctype, ldc, batchCount, computeType, &g);
  // The pointer arrays live in "device" memory (host memory here), read when the work runs:
  // earlier work on the stream may have written them.
  if (st == kOk) check_operands("cublasGemmBatchedEx pointer arrays", Aarray, Barray, Carray, Carray);
  if (st == kOk && g.m > 0 && g.n > 0)
    emu::enqueue(handle->stream, [g, Aarray, Barray, Carray, batchCount]() mutable {
      for (int i = 0; i < batchCount; ++i) {
        check_operands("cublasGemmBatchedEx", Aarray[i], Barray[i], Carray[i], Carray[i]);
        // cuBLAS cannot see these pointers to choose a kernel for them, and its tensor-core
        // kernels assume 16-byte alignment: lansbert sends other batches to strided calls.
        for (const void* p : {Aarray[i], Barray[i], static_cast<const void*>(Carray[i])})
          if (reinterpret_cast<uintptr_t>(p) % 16 != 0)
            emu::fatal("cublasGemmBatchedEx: matrix " + std::to_string(i) +
                       " of the batch is not 16-byte aligned (a GPU's kernel may fault on it)");
        g.a.p = Aarray[i], g.b.p = Barray[i], g.c.p = Carray[i], g.d = Carray[i];
        run_gemm(g);
      }
    });
  return st;
}

}  // extern "C"
