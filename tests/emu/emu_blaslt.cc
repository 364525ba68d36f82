// The CUDA emulator's host stand-in for cuBLASLt, for tests only (the cuBLAS one and the
// shared numerics: emu_blas.cc, emu_gemm.h): the descriptors, the heuristic and
// cublasLtMatmul with the default, bias, GELU_AUX_BIAS and DGELU_BGRAD epilogues (the last
// two with a 16-bit D and aux of D's type, as lansbert asks), with the signatures <cublasLt.h>
// declares. Descriptors are read when cublasLtMatmul is called, as cuBLASLt does; the
// arithmetic is queued on the call's stream (emu_streams.h).
#include <cublasLt.h>

#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <type_traits>

#include "emu_gemm.h"
#include "emu_state.h"
#include "emu_streams.h"

using namespace emu::blas;

// The handle the header leaves opaque.
struct cublasLtContext {
  int unused = 0;
};

namespace {

// --- cuBLASLt descriptors: each opaque struct the caller holds is the first member of ours,
// so the handle converts back to our struct (pointer-interconvertible, standard layout).
struct LtDesc {
  cublasLtMatmulDescOpaque_t opaque;
  int32_t compute = CUBLAS_COMPUTE_32F, scale_type = CUDA_R_32F,
          pointer_mode = CUBLASLT_POINTER_MODE_HOST;
  int32_t transa = CUBLAS_OP_N, transb = CUBLAS_OP_N, transc = CUBLAS_OP_N,
          fill = CUBLAS_FILL_MODE_FULL;
  uint32_t epilogue = CUBLASLT_EPILOGUE_DEFAULT;
  const void* bias = nullptr;
  int32_t bias_type = -1;  // -1: D's type (cublasLt.h, CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE)
  void* aux = nullptr;     // EPILOGUE_AUX_POINTER
  int64_t aux_ld = 0;      // EPILOGUE_AUX_LD
  int32_t aux_type = -1;   // -1: D's type (EPILOGUE_AUX_DATA_TYPE)
};
struct LtLayout {
  cublasLtMatrixLayoutOpaque_t opaque;
  cudaDataType_t type = CUDA_R_32F;
  uint64_t rows = 0, cols = 0;
  int64_t ld = 0;
};
static_assert(std::is_standard_layout_v<LtDesc> && std::is_standard_layout_v<LtLayout>);

LtDesc* of(cublasLtMatmulDesc_t d) {
  return reinterpret_cast<LtDesc*>(d);
}
const LtLayout* of(cublasLtMatrixLayout_t l) {
  return reinterpret_cast<const LtLayout*>(l);
}

template <typename T>
cublasStatus_t store_attr(T* field, const void* buf, size_t bytes) {
  if (!buf || bytes != sizeof(T)) return kBad;
  std::memcpy(field, buf, sizeof(T));
  return kOk;
}

// Everything cublasLtMatmul and the heuristic check. With CUBLASLT_EPILOGUE_BIAS the bias is
// added after alpha and beta: D = alpha op(A) op(B) + beta C + bias, the cuBLASLt
// documentation's D = epilogue(alpha * op(A) op(B) + beta * C + bias) with an identity
// activation (https://docs.nvidia.com/cuda/cublas/#cublasltmatmul, and cublasLt.h on
// CUBLASLT_EPILOGUE_BIAS: "broadcasted to all columns and added before applying final
// postprocessing").
cublasStatus_t make_lt(cublasLtHandle_t h, cublasLtMatmulDesc_t desc, cublasLtMatrixLayout_t la,
                       cublasLtMatrixLayout_t lb, cublasLtMatrixLayout_t lc,
                       cublasLtMatrixLayout_t ld, Gemm* g) {
  if (!h) return CUBLAS_STATUS_NOT_INITIALIZED;
  if (!desc || !la || !lb || !lc || !ld) return kBad;
  const LtDesc& s = *of(desc);
  const LtLayout &A = *of(la), &B = *of(lb), &C = *of(lc), &D = *of(ld);
  if (cublasStatus_t st = check_op(s.transa); st != kOk) return st;
  if (cublasStatus_t st = check_op(s.transb); st != kOk) return st;
  if (s.transc != CUBLAS_OP_N || s.scale_type != CUDA_R_32F ||
      s.pointer_mode != CUBLASLT_POINTER_MODE_HOST)
    return kUnsupported;
  const bool ta = s.transa == CUBLAS_OP_T, tb = s.transb == CUBLAS_OP_T;
  const uint64_t m = D.rows, n = D.cols, k = ta ? A.rows : A.cols;
  if ((ta ? A.cols : A.rows) != m || (tb ? B.cols : B.rows) != k || (tb ? B.rows : B.cols) != n ||
      C.rows != m || C.cols != n)
    return kBad;
  for (const LtLayout* l : {&A, &B, &C, &D})
    if (l->ld < 1 || uint64_t(l->ld) < l->rows) return kBad;
  if (C.type != D.type || !types_supported(s.compute, A.type, B.type, D.type)) return kUnsupported;
  *g = Gemm{};
  g->ta = ta, g->tb = tb, g->m = int64_t(m), g->n = int64_t(n), g->k = int64_t(k);
  g->a = {nullptr, A.type, A.ld}, g->b = {nullptr, B.type, B.ld}, g->c = {nullptr, C.type, C.ld};
  g->d_type = D.type, g->ldd = D.ld, g->compute = cublasComputeType_t(s.compute);
  if (s.epilogue == CUBLASLT_EPILOGUE_DEFAULT) return kOk;
  const bool gelu_aux = s.epilogue == CUBLASLT_EPILOGUE_GELU_AUX_BIAS, dgelu = s.epilogue == CUBLASLT_EPILOGUE_DGELU_BGRAD;
  if (s.epilogue != CUBLASLT_EPILOGUE_BIAS && !gelu_aux && !dgelu) return kUnsupported;
  // The bias has D's type unless told otherwise; a 16-bit D may take an fp32 bias.
  const cudaDataType_t bt = s.bias_type == -1 ? D.type : cudaDataType_t(s.bias_type);
  if (bt != D.type && !(is_half(D.type) && bt == CUDA_R_32F)) return kUnsupported;
  g->bias = s.bias, g->bias_type = bt;
  // A fault to inject (tests of lansbert's one-time epilogue checks): an fp32 bias beside a
  // 16-bit D accepted, then read and written as D's type, as a library that ignored
  // BIAS_DATA_TYPE would.
  if (const char* v = std::getenv("LANSBERT_EMU_LT_BIAS_AS_D_TYPE"); v && *v == '1' && bt != D.type)
    g->bias_type = D.type;
  if (!gelu_aux && !dgelu) return kOk;
  // cublasLt.h, EPILOGUE_AUX_LD: "divisible by 8 and no less than the number of rows" of D.
  if (s.aux_ld < int64_t(m) || s.aux_ld % 8 != 0) return kBad;
  if (!is_half(D.type) || (s.aux_type != -1 && s.aux_type != D.type)) return kUnsupported;
  g->epilogue = gelu_aux ? Epilogue::kGeluAux : Epilogue::kDGelu;
  g->aux = s.aux, g->aux_ld = s.aux_ld;
  return kOk;
}

// A fault to inject (tests of lansbert's fallback from the epilogue GEMMs): with
// LANSBERT_EMU_LT_REFUSE=heuristic or =matmul that call answers CUBLAS_STATUS_INVALID_VALUE to
// every well-formed epilogue GEMM, as a cuBLASLt version that does not take a combination may.
bool refuses(const char* where) {
  const char* v = std::getenv("LANSBERT_EMU_LT_REFUSE");
  return v && std::strcmp(v, where) == 0;
}

}  // namespace

extern "C" {

// --- cuBLASLt -------------------------------------------------------------------------------
cublasStatus_t cublasLtCreate(cublasLtHandle_t* lightHandle) {
  return create(lightHandle);
}
cublasStatus_t cublasLtDestroy(cublasLtHandle_t lightHandle) {
  return destroy(lightHandle);
}

cublasStatus_t cublasLtMatmulDescCreate(cublasLtMatmulDesc_t* matmulDesc,
                                        cublasComputeType_t computeType, cudaDataType_t scaleType) {
  if (!matmulDesc) return kBad;
  LtDesc* d = new LtDesc{};
  d->compute = computeType, d->scale_type = scaleType;
  *matmulDesc = &d->opaque;
  return kOk;
}

cublasStatus_t cublasLtMatmulDescDestroy(cublasLtMatmulDesc_t matmulDesc) {
  return (delete of(matmulDesc), kOk);
}

// Sizes as cublasLt.h gives them: int32_t for types, operations and modes, uint32_t for the
// epilogue, a pointer for the bias. Attributes lansbert does not use are accepted unread.
cublasStatus_t cublasLtMatmulDescSetAttribute(cublasLtMatmulDesc_t matmulDesc,
                                              cublasLtMatmulDescAttributes_t attr, const void* buf,
                                              size_t sizeInBytes) {
  if (!matmulDesc) return kBad;
  LtDesc* d = of(matmulDesc);
  switch (attr) {
    case CUBLASLT_MATMUL_DESC_COMPUTE_TYPE:
      return store_attr(&d->compute, buf, sizeInBytes);
    case CUBLASLT_MATMUL_DESC_SCALE_TYPE:
      return store_attr(&d->scale_type, buf, sizeInBytes);
    case CUBLASLT_MATMUL_DESC_POINTER_MODE:
      return store_attr(&d->pointer_mode, buf, sizeInBytes);
    case CUBLASLT_MATMUL_DESC_TRANSA:
      return store_attr(&d->transa, buf, sizeInBytes);
    case CUBLASLT_MATMUL_DESC_TRANSB:
      return store_attr(&d->transb, buf, sizeInBytes);
    case CUBLASLT_MATMUL_DESC_TRANSC:
      return store_attr(&d->transc, buf, sizeInBytes);
    case CUBLASLT_MATMUL_DESC_FILL_MODE:
      return store_attr(&d->fill, buf, sizeInBytes);
    case CUBLASLT_MATMUL_DESC_EPILOGUE:
      return store_attr(&d->epilogue, buf, sizeInBytes);
    case CUBLASLT_MATMUL_DESC_BIAS_POINTER:
      return store_attr(&d->bias, buf, sizeInBytes);
    case CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE:
      return store_attr(&d->bias_type, buf, sizeInBytes);
    case CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_POINTER:
      return store_attr(&d->aux, buf, sizeInBytes);
    case CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_LD:
      return store_attr(&d->aux_ld, buf, sizeInBytes);
    case CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_DATA_TYPE:
      return store_attr(&d->aux_type, buf, sizeInBytes);
    default:
      return buf ? kOk : kBad;
  }
}

cublasStatus_t cublasLtMatrixLayoutCreate(cublasLtMatrixLayout_t* matLayout, cudaDataType type,
                                          uint64_t rows, uint64_t cols, int64_t ld) {
  if (!matLayout) return kBad;
  LtLayout* l = new LtLayout{};
  l->type = type, l->rows = rows, l->cols = cols, l->ld = ld;  // checked where used
  *matLayout = &l->opaque;
  return kOk;
}

cublasStatus_t cublasLtMatrixLayoutDestroy(cublasLtMatrixLayout_t matLayout) {
  return (delete of(matLayout), kOk);
}

// Preferences only narrow the heuristic's choice; the one emulated algorithm meets them all
// (no workspace, no alignment, no split-K reduction), so they are size-checked and dropped.
cublasStatus_t cublasLtMatmulPreferenceCreate(cublasLtMatmulPreference_t* pref) {
  return create(pref);
}

cublasStatus_t cublasLtMatmulPreferenceDestroy(cublasLtMatmulPreference_t pref) {
  return (delete pref, kOk);
}

cublasStatus_t cublasLtMatmulPreferenceSetAttribute(cublasLtMatmulPreference_t pref,
                                                    cublasLtMatmulPreferenceAttributes_t attr,
                                                    const void* buf, size_t sizeInBytes) {
  // cublasLt.h: uint64_t for these two, uint32_t or float for the others.
  const bool wide =
      attr == CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES || attr == CUBLASLT_MATMUL_PREF_IMPL_MASK;
  return pref && buf && sizeInBytes == (wide ? 8u : 4u) ? kOk : kBad;
}

cublasStatus_t cublasLtMatmulAlgoGetHeuristic(
    cublasLtHandle_t lightHandle, cublasLtMatmulDesc_t operationDesc, cublasLtMatrixLayout_t Adesc,
    cublasLtMatrixLayout_t Bdesc, cublasLtMatrixLayout_t Cdesc, cublasLtMatrixLayout_t Ddesc,
    cublasLtMatmulPreference_t preference, int requestedAlgoCount,
    cublasLtMatmulHeuristicResult_t heuristicResultsArray[], int* returnAlgoCount) {
  if (!preference || requestedAlgoCount <= 0 || !heuristicResultsArray || !returnAlgoCount)
    return kBad;
  Gemm g;
  const cublasStatus_t st = make_lt(lightHandle, operationDesc, Adesc, Bdesc, Cdesc, Ddesc, &g);
  *returnAlgoCount = 0;
  if (st != kOk) return st;
  if (of(operationDesc)->epilogue != CUBLASLT_EPILOGUE_DEFAULT && refuses("heuristic")) return kBad;
  heuristicResultsArray[0] = cublasLtMatmulHeuristicResult_t{};  // the algo: all zeros, never read
  heuristicResultsArray[0].state = kOk;                          // workspaceSize stays 0
  heuristicResultsArray[0].wavesCount = 1.0f;
  *returnAlgoCount = 1;
  return kOk;
}

cublasStatus_t cublasLtMatmul(cublasLtHandle_t lightHandle, cublasLtMatmulDesc_t computeDesc,
                              const void* alpha, const void* A, cublasLtMatrixLayout_t Adesc,
                              const void* B, cublasLtMatrixLayout_t Bdesc, const void* beta,
                              const void* C, cublasLtMatrixLayout_t Cdesc, void* D,
                              cublasLtMatrixLayout_t Ddesc, const cublasLtMatmulAlgo_t*, void*,
                              size_t, cudaStream_t stream) {
  Gemm g;
  if (cublasStatus_t st = make_lt(lightHandle, computeDesc, Adesc, Bdesc, Cdesc, Ddesc, &g);
      st != kOk)
    return st;
  if (of(computeDesc)->epilogue != CUBLASLT_EPILOGUE_DEFAULT && refuses("matmul")) return kBad;
  if (!alpha || !beta || (of(computeDesc)->epilogue != CUBLASLT_EPILOGUE_DEFAULT && !g.bias) ||
      (g.epilogue != Epilogue::kNone && !g.aux))
    return kBad;
  // In place needs one layout for both: a column of C is read just before D's is written.
  if (C == D && of(Cdesc)->ld != of(Ddesc)->ld) return kBad;
  g.alpha = *static_cast<const float*>(alpha), g.beta = *static_cast<const float*>(beta);
  check_operands("cublasLtMatmul", A, B, C, D, g.bias);
  if (g.aux) emu::check_device_pointer("cublasLtMatmul aux", g.aux);
  g.a.p = A, g.b.p = B, g.c.p = C, g.d = D;
  if (g.m > 0 && g.n > 0) emu::enqueue(stream, [g] { run_gemm(g); });  // descriptors are read now, as cuBLASLt does
  return kOk;
}

}  // extern "C"

