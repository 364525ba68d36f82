// LtBiasMatmul (lt_bias_matmul.h): plans cached per shape, the bias and GELU epilogues, and the
// fallback signal when cuBLASLt has no algorithm.
#include "lt_bias_matmul.h"

#include <algorithm>
#include <cstdint>
#include <cstdio>

namespace lansbert::cuda {

namespace {

cublasOperation_t to_op(Trans t) { return t == Trans::kYes ? CUBLAS_OP_T : CUBLAS_OP_N; }

// The largest power of two (up to 256, cuBLASLt's default assumption) dividing the address:
// the heuristic is told it, so it never picks a kernel that needs more.
int alignment(const void* p) {
  const uintptr_t a = reinterpret_cast<uintptr_t>(p);
  int bytes = 1;
  while (bytes < 256 && a % (2 * bytes) == 0) bytes *= 2;
  return bytes;
}

// Observed requirement of the bias epilogue (other projects report misaligned-address
// failures below 16 bytes); the ParamTable aligns every tensor far beyond it.
constexpr int kBiasAlignment = 16;

// RAII for a heuristic query's preferences.
struct Preference {
  cublasLtMatmulPreference_t p = nullptr;
  Preference() { CUBLAS_CHECK(cublasLtMatmulPreferenceCreate(&p)); }
  ~Preference() { cublasLtMatmulPreferenceDestroy(p); }
  template <typename V>
  void set(cublasLtMatmulPreferenceAttributes_t a, const V& v) {
    CUBLAS_CHECK(cublasLtMatmulPreferenceSetAttribute(p, a, &v, sizeof v));
  }
};

// cublasLt.h, EPILOGUE_AUX_LD: the GELU input's leading dimension "must be divisible by 8".
constexpr int kAuxLdMultiple = 8;

cublasLtEpilogue_t to_lt(LtBiasMatmul::Epilogue e) {
  switch (e) {
    case LtBiasMatmul::Epilogue::kGeluAuxBias: return CUBLASLT_EPILOGUE_GELU_AUX_BIAS;
    case LtBiasMatmul::Epilogue::kDGeluBgrad: return CUBLASLT_EPILOGUE_DGELU_BGRAD;
    default: return CUBLASLT_EPILOGUE_BIAS;
  }
}

// The pointers set per call (and before the heuristic, which reads their alignment).
void set_pointers(cublasLtMatmulDesc_t desc, const LtBiasMatmul::Call& c) {
  CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &c.bias, sizeof c.bias));
  if (c.aux)
    CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_POINTER, &c.aux, sizeof c.aux));
}

// Once per process for each epilogue and output type (fp32 / 16-bit): every shape of that kind
// takes the same fallback, and a log line per GEMM shape would be noise.
void say_fallback(const LtBiasMatmul::Call& c, const char* why) {
  static bool said[3][2] = {};
  const char* names[3] = {"bias", "GELU_AUX_BIAS", "DGELU_BGRAD"};
  const int e = int(c.epilogue), half = c.c_type != CUDA_R_32F;
  if (said[e][half]) return;
  said[e][half] = true;
  std::fprintf(stderr, "lansbert: cuBLASLt: the %s epilogue with an fp32 bias and %s output refused (%s): plain "
               "GEMMs and bias kernels instead\n", names[e], half ? "16-bit" : "fp32", why);
}

}  // namespace

struct LtBiasMatmul::Plan {
  cublasLtMatmulDesc_t desc = nullptr;
  cublasLtMatrixLayout_t la = nullptr, lb = nullptr, lc = nullptr;
  cublasLtMatmulAlgo_t algo{};
  ~Plan() {
    if (lc) cublasLtMatrixLayoutDestroy(lc);
    if (lb) cublasLtMatrixLayoutDestroy(lb);
    if (la) cublasLtMatrixLayoutDestroy(la);
    if (desc) cublasLtMatmulDescDestroy(desc);
  }
};

LtBiasMatmul::LtBiasMatmul() = default;
LtBiasMatmul::~LtBiasMatmul() = default;

bool LtBiasMatmul::run(const Call& c, cudaStream_t stream) {
  if (c.m <= 0 || c.n <= 0 || c.k <= 0 || !c.bias) return false;
  const bool gelu = c.epilogue != Epilogue::kBias;
  // The GELU epilogues: a 16-bit aux beside a 16-bit C, with a leading dimension cuBLASLt takes.
  if (gelu && (!c.aux || c.c_type == CUDA_R_32F || c.ldc % kAuxLdMultiple != 0)) return false;
  const int align_bias = alignment(c.bias);
  if (align_bias < kBiasAlignment) return false;
  const int align_a = alignment(c.a), align_b = alignment(c.b), align_c = alignment(c.c);
  const int align_aux = c.aux ? alignment(c.aux) : 0;
  const Key key{int(c.epilogue), int(c.ta),     int(c.tb),     c.m,           c.n,            c.k,
                c.lda,           c.ldb,         c.ldc,         int(c.a_type), int(c.b_type),  int(c.c_type),
                int(c.compute),  align_a,       align_b,       align_c,       align_bias,     align_aux};
  auto it = plans_.find(key);
  if (it == plans_.end()) {
    auto plan = std::make_unique<Plan>();
    CUBLAS_CHECK(cublasLtMatmulDescCreate(&plan->desc, c.compute, CUDA_R_32F));
    // Column-major view: D^T [n, m] = op(B^T) [n, k] * op(A^T) [k, m]: B is cuBLASLt's A.
    const cublasOperation_t op_a = to_op(c.tb), op_b = to_op(c.ta);
    const cublasLtEpilogue_t epilogue = to_lt(c.epilogue);
    CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(plan->desc, CUBLASLT_MATMUL_DESC_TRANSA, &op_a, sizeof op_a));
    CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(plan->desc, CUBLASLT_MATMUL_DESC_TRANSB, &op_b, sizeof op_b));
    CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(plan->desc, CUBLASLT_MATMUL_DESC_EPILOGUE, &epilogue, sizeof epilogue));
    // Stored (column-major) shapes of the swapped operands.
    CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&plan->la, c.b_type, c.tb == Trans::kNo ? c.n : c.k,
                                            c.tb == Trans::kNo ? c.k : c.n, c.ldb));
    CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&plan->lb, c.a_type, c.ta == Trans::kNo ? c.k : c.m,
                                            c.ta == Trans::kNo ? c.m : c.k, c.lda));
    CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&plan->lc, c.c_type, c.n, c.m, c.ldc));
    // A 16-bit output would take a 16-bit bias by default (cublasLt.h, BIAS_DATA_TYPE): the fp32
    // bias is asked for, so the sum is rounded once, as the CPU twin rounds it. Where this
    // cuBLASLt refuses that, the call falls back (a plan without an algorithm).
    const int32_t bias_type = CUDA_R_32F;
    if (c.c_type != CUDA_R_32F &&
        cublasLtMatmulDescSetAttribute(plan->desc, CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE, &bias_type,
                                       sizeof bias_type) != CUBLAS_STATUS_SUCCESS) {
      say_fallback(c, "BIAS_DATA_TYPE fp32 not taken");
      plans_.emplace(key, nullptr);
      return false;
    }
    // The aux matrix is column-major [n, m] like C, at C's leading dimension, in C's type (the
    // default AUX_DATA_TYPE).
    if (gelu) {
      const int64_t aux_ld = c.ldc;
      CUBLAS_CHECK(
          cublasLtMatmulDescSetAttribute(plan->desc, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_LD, &aux_ld, sizeof aux_ld));
    }
    // The heuristic takes the bias and aux pointers' alignment from the pointers themselves
    // (cublasLt.h, BIAS_POINTER and EPILOGUE_AUX_POINTER; there is no preference for them), so
    // they are set before the query too.
    set_pointers(plan->desc, c);
    Preference pref;
    const size_t ws = handle_.workspace_bytes();
    const uint32_t aa = uint32_t(align_b), ab = uint32_t(align_a), ac = uint32_t(align_c);  // swapped, as above
    pref.set(CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, ws);
    pref.set(CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, aa);
    pref.set(CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES, ab);
    pref.set(CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, ac);
    pref.set(CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES, ac);
    if (c.c_type != CUDA_R_32F) {  // split-K partial sums in fp32, never in D's 16-bit type
      const uint32_t schemes = CUBLASLT_REDUCTION_SCHEME_COMPUTE_TYPE;
      pref.set(CUBLASLT_MATMUL_PREF_REDUCTION_SCHEME_MASK, schemes);
    }
    cublasLtMatmulHeuristicResult_t result{};
    int found = 0;
    // Any refusal (no algorithm, "not supported", an invalid-value answer to a combination a
    // cuBLASLt version does not take: an fp32 bias beside a 16-bit D is outside what cublasLt.h
    // promises, and the rules for small n such as the NSP head's 2 have varied) means the
    // caller's fallback, the plain GEMM and the bias kernels on the same operands: a first run
    // on a new GPU or library continues, slower, and says so once per epilogue and output type
    // (scripts/gpu-check.sh collects these lines). A failure that is not a refusal (out of
    // memory, a bad handle) stays fatal.
    const cublasStatus_t st = cublasLtMatmulAlgoGetHeuristic(handle_.get(), plan->desc, plan->la, plan->lb, plan->lc,
                                                             plan->lc, pref.p, 1, &result, &found);
    if (st != CUBLAS_STATUS_SUCCESS && st != CUBLAS_STATUS_NOT_SUPPORTED && st != CUBLAS_STATUS_INVALID_VALUE)
      CUBLAS_CHECK(st);
    if (st != CUBLAS_STATUS_SUCCESS || found == 0) say_fallback(c, st == CUBLAS_STATUS_SUCCESS ? "none found"
                                                                                             : cublasGetStatusName(st));
    if (st == CUBLAS_STATUS_SUCCESS && found > 0) {
      plan->algo = result.algo;
    } else {
      plan.reset();
    }
    it = plans_.emplace(key, std::move(plan)).first;
  }
  Plan* plan = it->second.get();
  if (!plan) return false;
  set_pointers(plan->desc, c);
  const float alpha = 1.0f, beta = 0.0f;
  const cublasStatus_t st = cublasLtMatmul(handle_.get(), plan->desc, &alpha, c.b, plan->la, c.a, plan->lb, &beta,
                                           c.c, plan->lc, c.c, plan->lc, &plan->algo, handle_.workspace(),
                                           handle_.workspace_bytes(), stream);
  // Nothing queued: this key falls back from now on (a refusal as above, after the heuristic
  // offered the algorithm).
  if (st == CUBLAS_STATUS_NOT_SUPPORTED || st == CUBLAS_STATUS_INVALID_VALUE) {
    say_fallback(c, cublasGetStatusName(st));
    it->second.reset();
    return false;
  }
  CUBLAS_CHECK(st);
  return true;
}

}  // namespace lansbert::cuda
