// The CUDA emulator's host stand-in for cuBLAS and cuBLASLt, for tests only: it defines,
// with the signatures <cublas_v2.h> and <cublasLt.h> declare, the entry points lansbert's
// CUDA backend calls, so the backend links against this file instead of libcublas. "Device
// memory" is host memory here; each call checks its arguments and reads its host scalars and
// descriptors at once, and queues the arithmetic on its stream (emu_streams.h); workspaces are
// accepted and ignored. It is a reference, not a fast path: sizes in the emulated tests are tiny.
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
#include <cublasLt.h>
#include <cublas_v2.h>
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <algorithm>
#include <bit>
#include <cstdint>
#include <cstring>
#include <string>
#include <utility>
#include <type_traits>
#include <vector>

#include "emu_state.h"
#include "emu_streams.h"

// The handles the headers leave opaque. Nothing is kept in them but what the calls store.
struct cublasContext {
  cudaStream_t stream = nullptr;
  cublasMath_t math = CUBLAS_DEFAULT_MATH;  // stored: math modes only permit reduced precision
};
struct cublasLtContext {
  int unused = 0;
};

namespace {

constexpr cublasStatus_t kOk = CUBLAS_STATUS_SUCCESS, kBad = CUBLAS_STATUS_INVALID_VALUE,
                         kUnsupported = CUBLAS_STATUS_NOT_SUPPORTED;

bool is_half(cudaDataType_t t) {
  return t == CUDA_R_16F || t == CUDA_R_16BF;
}
size_t type_bytes(cudaDataType_t t) {
  return t == CUDA_R_32F ? 4 : 2;
}

float load(const void* p, cudaDataType_t t, int64_t i) {
  if (t == CUDA_R_16F) return __half2float(static_cast<const __half*>(p)[i]);
  if (t == CUDA_R_16BF) return __bfloat162float(static_cast<const __nv_bfloat16*>(p)[i]);
  return static_cast<const float*>(p)[i];
}

void store(void* p, cudaDataType_t t, int64_t i, float v) {
  if (t == CUDA_R_16F)
    static_cast<__half*>(p)[i] = __float2half_rn(v);
  else if (t == CUDA_R_16BF)
    static_cast<__nv_bfloat16*>(p)[i] = __float2bfloat16_rn(v);
  else
    static_cast<float*>(p)[i] = v;
}

// TF32 keeps fp32's exponent and 10 of its 23 mantissa bits; round to nearest even.
float round_tf32(float x) {
  uint32_t bits = std::bit_cast<uint32_t>(x);
  if ((bits & 0x7f800000u) == 0x7f800000u) return x;  // inf and NaN as they are
  bits += 0xfffu + ((bits >> 13) & 1u);
  return std::bit_cast<float>(bits & ~0x1fffu);
}

// An input as the compute type lets the hardware see it.
float round_input(float x, cublasComputeType_t ct) {
  switch (ct) {
    case CUBLAS_COMPUTE_32F_FAST_16BF:
      return __bfloat162float(__float2bfloat16_rn(x));
    case CUBLAS_COMPUTE_32F_FAST_16F:
      return __half2float(__float2half_rn(x));
    case CUBLAS_COMPUTE_32F_FAST_TF32:
      return round_tf32(x);
    default:
      return x;
  }
}

// The documented (compute, A/B, C) combinations this emulator computes (see the top comment).
bool types_supported(int ct, cudaDataType_t a, cudaDataType_t b, cudaDataType_t c) {
  if (a != b) return false;
  if (ct == CUBLAS_COMPUTE_32F)
    return (a == CUDA_R_32F && c == CUDA_R_32F) || (is_half(a) && (c == a || c == CUDA_R_32F));
  if (ct == CUBLAS_COMPUTE_32F_FAST_16BF || ct == CUBLAS_COMPUTE_32F_FAST_16F ||
      ct == CUBLAS_COMPUTE_32F_FAST_TF32)
    return a == CUDA_R_32F && c == CUDA_R_32F;
  return false;
}

// N and T are computed; C (conjugate) is refused; anything else is not an operation.
cublasStatus_t check_op(int op) {
  if (op == CUBLAS_OP_N || op == CUBLAS_OP_T) return kOk;
  return op == CUBLAS_OP_C || op == CUBLAS_OP_CONJG ? kUnsupported : kBad;
}

struct Mat {
  const void* p = nullptr;
  cudaDataType_t type = CUDA_R_32F;
  int64_t ld = 0;
};

// D = alpha * op(A) op(B) + beta * C (+ bias[row]), column-major, D m x n, op(A) m x k.
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
};

// op(A) is gathered once into an fp32 k x m panel (row p = column p of op(A)), so the inner
// loop runs over contiguous memory and vectorises; one column of D is accumulated at a time.
// A column of C is read before the same column of D is written, so C == D (same ld) is safe.
void run_gemm(const Gemm& g) {
  const int64_t m = g.m, n = g.n, k = g.k;
  const bool product = g.alpha != 0.0f && k > 0;
  std::vector<float> a(product ? size_t(m * k) : 0), bcol(product ? size_t(k) : 0);
  std::vector<double> acc(static_cast<size_t>(m));
  for (int64_t p = 0; product && p < k; ++p)
    for (int64_t i = 0; i < m; ++i)
      a[size_t(p * m + i)] =
          round_input(load(g.a.p, g.a.type, g.ta ? p + i * g.a.ld : i + p * g.a.ld), g.compute);
  for (int64_t j = 0; j < n; ++j) {
    std::fill(acc.begin(), acc.end(), 0.0);
    for (int64_t p = 0; product && p < k; ++p)
      bcol[size_t(p)] =
          round_input(load(g.b.p, g.b.type, g.tb ? j + p * g.b.ld : p + j * g.b.ld), g.compute);
    for (int64_t p = 0; product && p < k; ++p) {
      const float bp = bcol[size_t(p)];
      const float* ap = a.data() + p * m;
      double* accp = acc.data();
      for (int64_t i = 0; i < m; ++i) accp[i] += double(ap[i] * bp);  // fp32 product, double sum
    }
    for (int64_t i = 0; i < m; ++i) {
      float v = product ? g.alpha * float(acc[size_t(i)]) : 0.0f;
      if (g.beta != 0.0f) v += g.beta * load(g.c.p, g.c.type, i + j * g.c.ld);
      if (g.bias) v += load(g.bias, g.bias_type, i);
      store(g.d, g.d_type, i + j * g.ldd, v);
    }
  }
}

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
void check_operands(const char* what, const void* a, const void* b, const void* c, const void* d,
                    const void* bias = nullptr) {
  for (auto [name, p] : {std::pair{"A", a}, std::pair{"B", b}, std::pair{"C", c}, std::pair{"D", d},
                         std::pair{"bias", bias}})
    emu::check_device_pointer(std::string(what) + " " + name, p);
}

void run_on(Gemm g, const void* a, const void* b, void* c, cudaStream_t s) {
  check_operands("cuBLAS GEMM", a, b, c, c);
  g.a.p = a, g.b.p = b, g.c.p = c, g.d = c;
  if (g.m > 0 && g.n > 0) emu::enqueue(s, [g] { run_gemm(g); });
}

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
  if (s.epilogue != CUBLASLT_EPILOGUE_BIAS) return kUnsupported;
  // The bias has D's type unless told otherwise; a 16-bit D may take an fp32 bias.
  const cudaDataType_t bt = s.bias_type == -1 ? D.type : cudaDataType_t(s.bias_type);
  if (bt != D.type && !(is_half(D.type) && bt == CUDA_R_32F)) return kUnsupported;
  g->bias = s.bias, g->bias_type = bt;
  return kOk;
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
        g.a.p = Aarray[i], g.b.p = Barray[i], g.c.p = Carray[i], g.d = Carray[i];
        run_gemm(g);
      }
    });
  return st;
}

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
  if (!alpha || !beta || (of(computeDesc)->epilogue == CUBLASLT_EPILOGUE_BIAS && !g.bias))
    return kBad;
  // In place needs one layout for both: a column of C is read just before D's is written.
  if (C == D && of(Cdesc)->ld != of(Ddesc)->ld) return kBad;
  g.alpha = *static_cast<const float*>(alpha), g.beta = *static_cast<const float*>(beta);
  check_operands("cublasLtMatmul", A, B, C, D, g.bias);
  g.a.p = A, g.b.p = B, g.c.p = C, g.d = D;
  if (g.m > 0 && g.n > 0) emu::enqueue(stream, [g] { run_gemm(g); });  // descriptors are read now, as cuBLASLt does
  return kOk;
}

}  // extern "C"
