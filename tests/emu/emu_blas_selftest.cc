// Self-test of emu_blas.cc (the emulator's host cuBLAS/cuBLASLt) against a naive double
// reference written here, independently of the emulator's loop. Built by hand from the
// repository root, no CUDA library linked (prints each failed check, exits non-zero if any):
//   g++ -std=c++20 -O2 -I/usr/local/cuda/include tests/emu/emu_blas.cc
//       tests/emu/emu_blas_selftest.cc -o /tmp/emu_blas_selftest && /tmp/emu_blas_selftest
#include <cublasLt.h>
#include <cuda_runtime.h>
#include <cublas_v2.h>
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <limits>
#include <random>
#include <string>
#include <vector>

namespace {

int failures = 0;
void check(bool ok, const std::string& what) {
  if (!ok) {
    ++failures;
    std::printf("FAIL: %s\n", what.c_str());
  }
}
void check_st(cublasStatus_t got, cublasStatus_t want, const std::string& what) {
  check(got == want,
        what + ": got " + cublasGetStatusName(got) + ", want " + cublasGetStatusName(want));
}

const float kNaN = std::numeric_limits<float>::quiet_NaN();

// A column-major matrix held as raw bytes of type t, with its exact values as doubles.
// The emulator refuses pageable host memory as a GEMM operand (a GPU would fault), so the
// test's buffers are pinned host memory: reachable from both sides.
template <typename T>
struct Pinned {
  using value_type = T;
  Pinned() = default;
  template <typename U>
  Pinned(const Pinned<U>&) {}
  T* allocate(size_t n) {
    void* p = nullptr;
    if (cudaMallocHost(&p, n * sizeof(T)) != cudaSuccess) throw std::bad_alloc();
    return static_cast<T*>(p);
  }
  void deallocate(T* p, size_t) { cudaFreeHost(p); }
  bool operator==(const Pinned&) const { return true; }
};
template <typename T>
using PinnedVec = std::vector<T, Pinned<T>>;

struct Buf {
  cudaDataType_t t;
  PinnedVec<uint16_t> h;
  PinnedVec<float> f;
  Buf(cudaDataType_t type, size_t n, float fill) : t(type) {
    if (t == CUDA_R_32F)
      f.assign(n, fill);
    else
      h.assign(n, 0);
    for (size_t i = 0; t != CUDA_R_32F && i < n; ++i) set(i, fill);
  }
  void* p() {
    return t == CUDA_R_32F ? static_cast<void*>(f.data()) : static_cast<void*>(h.data());
  }
  void set(size_t i, float v) {
    if (t == CUDA_R_32F) {
      f[i] = v;
      return;
    }
    h[i] = t == CUDA_R_16F ? __half_raw(__float2half_rn(v)).x
                           : __nv_bfloat16_raw(__float2bfloat16_rn(v)).x;
  }
  double get(size_t i) const {
    if (t == CUDA_R_32F) return f[i];
    if (t == CUDA_R_16F) return __half2float(__half(__half_raw{h[i]}));
    return __bfloat162float(__nv_bfloat16(__nv_bfloat16_raw{h[i]}));
  }
};

std::mt19937 rng(12345);
void randomize(Buf& b) {
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  for (size_t i = 0; i < (b.t == CUDA_R_32F ? b.f.size() : b.h.size()); ++i) b.set(i, u(rng));
}

// Naive reference: element (i, j) of alpha op(A) op(B) + beta C (+ bias[i]), in double;
// beta == 0 ignores C. Also returns sum |a||b| for the tolerance.
double ref(const Buf& A, int lda, bool ta, const Buf& B, int ldb, bool tb, int k, double alpha,
           double beta, double c, double bias, int i, int j, double* mag) {
  double s = 0, m = 0;
  for (int p = 0; p < k; ++p) {
    const double a = A.get(ta ? p + size_t(i) * lda : i + size_t(p) * lda);
    const double b = B.get(tb ? j + size_t(p) * ldb : p + size_t(j) * ldb);
    s += a * b;
    m += std::fabs(a * b);
  }
  *mag = std::fabs(alpha) * m + (beta != 0 ? std::fabs(beta * c) : 0.0) + std::fabs(bias);
  return alpha * s + (beta != 0 ? beta * c : 0.0) + bias;
}

double tolerance(cudaDataType_t out, double mag) {
  const double eps = out == CUDA_R_32F ? 0x1p-21 : out == CUDA_R_16F ? 0x1p-10 : 0x1p-7;
  return eps * mag + 1e-30;
}

std::string name(cudaDataType_t t) {
  return t == CUDA_R_32F ? "f32" : t == CUDA_R_16F ? "f16" : "bf16";
}

// One GemmEx case: C starts as `c0` everywhere (NaN or a value), padding rows must stay so.
void gemm_case(cublasHandle_t h, cudaDataType_t in, cudaDataType_t out, bool ta, bool tb,
               float alpha, float beta, float c0) {
  const int m = 5, n = 7, k = 3;
  const int lda = (ta ? k : m) + 2, ldb = (tb ? n : k) + 1, ldc = m + 3;
  Buf A(in, size_t(lda) * (ta ? m : k), kNaN), B(in, size_t(ldb) * (tb ? k : n), kNaN),
      C(out, size_t(ldc) * n, c0);
  for (int p = 0; p < (ta ? m : k); ++p)  // only the stored rows are numbers; padding stays NaN
    for (int r = 0; r < (ta ? k : m); ++r)
      A.set(r + size_t(p) * lda, std::uniform_real_distribution<float>(-1, 1)(rng));
  for (int p = 0; p < (tb ? k : n); ++p)
    for (int r = 0; r < (tb ? n : k); ++r)
      B.set(r + size_t(p) * ldb, std::uniform_real_distribution<float>(-1, 1)(rng));
  const Buf C_before = C;
  const std::string what = "GemmEx " + name(in) + "->" + name(out) + (ta ? " T" : " N") +
                           (tb ? "T" : "N") + " beta=" + std::to_string(beta);
  check_st(cublasGemmEx(h, ta ? CUBLAS_OP_T : CUBLAS_OP_N, tb ? CUBLAS_OP_T : CUBLAS_OP_N, m, n, k,
                        &alpha, A.p(), in, lda, B.p(), in, ldb, &beta, C.p(), out, ldc,
                        CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT),
           CUBLAS_STATUS_SUCCESS, what);
  cudaDeviceSynchronize();  // queued work runs when waited for (emu_streams.h)
  for (int j = 0; j < n; ++j)
    for (int i = 0; i < ldc; ++i) {
      const size_t at = i + size_t(j) * ldc;
      if (i >= m) {  // padding untouched
        check(std::isnan(C.get(at)) ? std::isnan(C_before.get(at)) : C.get(at) == C_before.get(at),
              what + " padding");
        continue;
      }
      double mag;
      const double want =
          ref(A, lda, ta, B, ldb, tb, k, alpha, beta, C_before.get(at), 0, i, j, &mag);
      check(std::fabs(C.get(at) - want) <= tolerance(out, mag),
            what + " (" + std::to_string(i) + "," + std::to_string(j) + ") got " +
                std::to_string(C.get(at)) + " want " + std::to_string(want));
    }
}

void test_gemm_ex(cublasHandle_t h) {
  const cudaDataType_t pairs[][2] = {{CUDA_R_32F, CUDA_R_32F},
                                     {CUDA_R_16BF, CUDA_R_32F},
                                     {CUDA_R_16F, CUDA_R_32F},
                                     {CUDA_R_16BF, CUDA_R_16BF},
                                     {CUDA_R_16F, CUDA_R_16F}};
  for (auto& tp : pairs)
    for (int ops = 0; ops < 4; ++ops) {
      gemm_case(h, tp[0], tp[1], ops & 1, ops & 2, 1.0f, 0.0f,
                kNaN);  // beta 0: NaN in C never read
      gemm_case(h, tp[0], tp[1], ops & 1, ops & 2, 0.5f, 1.0f, 0.25f);  // beta 1: accumulate
    }
}

// The FAST_* compute types round fp32 inputs: 1 + 2^-12 is 1 in bf16, fp16 and TF32.
void test_fast_compute(cublasHandle_t h) {
  const float one = 1.0f, zero = 0.0f, a_in = 1.0f + 0x1p-12f;
  PinnedVec<float> a{a_in}, b{1.0f}, c{kNaN};  // operands in pinned memory; alpha, beta on the host
  const cublasComputeType_t types[] = {CUBLAS_COMPUTE_32F, CUBLAS_COMPUTE_32F_FAST_16BF,
                                       CUBLAS_COMPUTE_32F_FAST_16F, CUBLAS_COMPUTE_32F_FAST_TF32};
  for (cublasComputeType_t ct : types) {
    c[0] = kNaN;
    check_st(cublasGemmEx(h, CUBLAS_OP_N, CUBLAS_OP_N, 1, 1, 1, &one, a.data(), CUDA_R_32F, 1, b.data(),
                          CUDA_R_32F, 1, &zero, c.data(), CUDA_R_32F, 1, ct, CUBLAS_GEMM_DEFAULT),
             CUBLAS_STATUS_SUCCESS, "fast compute");
    cudaDeviceSynchronize();  // queued work runs when waited for (emu_streams.h)
    check(c[0] == (ct == CUBLAS_COMPUTE_32F ? a_in : 1.0f),
          "compute type " + std::to_string(int(ct)) + " input rounding");
  }
  // TF32 keeps 10 mantissa bits: 1 + 2^-10 survives, 1 + 3 * 2^-12 rounds up to it.
  const float keep = 1.0f + 0x1p-10f, up = 1.0f + 3 * 0x1p-12f;
  for (float x : {keep, up}) {
    a[0] = x, c[0] = kNaN;
    cublasGemmEx(h, CUBLAS_OP_N, CUBLAS_OP_N, 1, 1, 1, &one, a.data(), CUDA_R_32F, 1, b.data(), CUDA_R_32F, 1,
                 &zero, c.data(), CUDA_R_32F, 1, CUBLAS_COMPUTE_32F_FAST_TF32, CUBLAS_GEMM_DEFAULT);
    cudaDeviceSynchronize();  // queued work runs when waited for (emu_streams.h)
    check(c[0] == keep, "tf32 rounding of " + std::to_string(x));
  }
}

void test_batched(cublasHandle_t h) {
  const int m = 4, n = 3, k = 5, lda = 6, ldb = 5, ldc = 4, batch = 3;
  // Strides past each matrix's extent, in multiples of 8 elements: the pointer-array call's
  // 16-bit matrices then start 16-byte aligned, as the emulator (like cuBLAS) requires.
  const long long sa = lda * k + 10, sb = ldb * n + 1, sc = ldc * n + 4;
  // Strided: fp32, NaN everywhere in C (beta 0), strides beyond each matrix's extent.
  Buf A(CUDA_R_32F, sa * batch, 0), B(CUDA_R_32F, sb * batch, 0);
  randomize(A), randomize(B);
  const float alpha = 1.5f, beta = 0.0f;
  Buf Cf(CUDA_R_32F, sc * batch, kNaN);
  check_st(
      cublasGemmStridedBatchedEx(h, CUBLAS_OP_N, CUBLAS_OP_N, m, n, k, &alpha, A.p(), CUDA_R_32F,
                                 lda, sa, B.p(), CUDA_R_32F, ldb, sb, &beta, Cf.p(), CUDA_R_32F,
                                 ldc, sc, batch, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT),
      CUBLAS_STATUS_SUCCESS, "strided batched");
  cudaDeviceSynchronize();  // queued work runs when waited for (emu_streams.h)
  // Pointer-array batched, bf16 in and out, the entries in reverse order.
  Buf Ah(CUDA_R_16BF, sa * batch, 0), Bh(CUDA_R_16BF, sb * batch, 0),
      Ch(CUDA_R_16BF, sc * batch, kNaN);
  randomize(Ah), randomize(Bh);
  PinnedVec<const void*> pa, pb;
  PinnedVec<void*> pc;
  for (int i = batch - 1; i >= 0; --i) {
    pa.push_back(Ah.h.data() + i * sa), pb.push_back(Bh.h.data() + i * sb),
        pc.push_back(Ch.h.data() + i * sc);
  }
  check_st(cublasGemmBatchedEx(h, CUBLAS_OP_N, CUBLAS_OP_N, m, n, k, &alpha, pa.data(), CUDA_R_16BF,
                               lda, pb.data(), CUDA_R_16BF, ldb, &beta, pc.data(), CUDA_R_16BF, ldc,
                               batch, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT),
           CUBLAS_STATUS_SUCCESS, "batched");
  cudaDeviceSynchronize();  // queued work runs when waited for (emu_streams.h)
  for (int e = 0; e < batch; ++e)
    for (int j = 0; j < n; ++j)
      for (int i = 0; i < m; ++i) {
        double mag;
        // Reference on a view shifted to entry e: copy the entry's operands out.
        Buf a1(CUDA_R_32F, sa, 0), b1(CUDA_R_32F, sb, 0), a2(CUDA_R_32F, sa, 0),
            b2(CUDA_R_32F, sb, 0);
        for (long long x = 0; x < sa; ++x)
          a1.f[x] = float(A.get(e * sa + x)), a2.f[x] = float(Ah.get(e * sa + x));
        for (long long x = 0; x < sb; ++x)
          b1.f[x] = float(B.get(e * sb + x)), b2.f[x] = float(Bh.get(e * sb + x));
        const double w1 = ref(a1, lda, false, b1, ldb, false, k, alpha, 0, 0, 0, i, j, &mag);
        check(std::fabs(Cf.get(e * sc + i + j * ldc) - w1) <= tolerance(CUDA_R_32F, mag),
              "strided entry");
        const double w2 = ref(a2, lda, false, b2, ldb, false, k, alpha, 0, 0, 0, i, j, &mag);
        check(std::fabs(Ch.get(e * sc + i + j * ldc) - w2) <= tolerance(CUDA_R_16BF, mag),
              "batched entry");
      }
}

// RAII-free Lt helpers: a layout per operand, a descriptor with the given epilogue.
cublasLtMatrixLayout_t layout(cudaDataType_t t, int rows, int cols, int ld) {
  cublasLtMatrixLayout_t l = nullptr;
  cublasLtMatrixLayoutCreate(&l, t, rows, cols, ld);
  return l;
}

// D (m x n, in place over C) = alpha op(A) op(B) + beta C + bias, checked against ref.
void lt_case(cublasLtHandle_t lt, cudaDataType_t in, cudaDataType_t out, bool ta, bool tb,
             bool with_bias, int bias_type, float alpha, float beta) {
  const int m = 6, n = 4, k = 5, lda = (ta ? k : m) + 1, ldb = (tb ? n : k) + 2, ldc = m + 1;
  Buf A(in, size_t(lda) * (ta ? m : k), 0), B(in, size_t(ldb) * (tb ? k : n), 0),
      C(out, size_t(ldc) * n, 0);
  randomize(A), randomize(B), randomize(C);
  const cudaDataType_t bt = bias_type == -1 ? out : cudaDataType_t(bias_type);
  Buf bias(bt, m, 0);
  randomize(bias);
  const Buf C0 = C;
  cublasLtMatmulDesc_t desc = nullptr;
  cublasLtMatmulDescCreate(&desc, CUBLAS_COMPUTE_32F, CUDA_R_32F);
  const int32_t opa = ta ? CUBLAS_OP_T : CUBLAS_OP_N, opb = tb ? CUBLAS_OP_T : CUBLAS_OP_N;
  cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_TRANSA, &opa, sizeof opa);
  cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_TRANSB, &opb, sizeof opb);
  if (with_bias) {
    const uint32_t epi = CUBLASLT_EPILOGUE_BIAS;
    const void* bp = bias.p();
    check_st(cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_EPILOGUE, &epi, sizeof epi),
             CUBLAS_STATUS_SUCCESS, "epilogue");
    check_st(
        cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &bp, sizeof bp),
        CUBLAS_STATUS_SUCCESS, "bias pointer");
    if (bias_type != -1)
      check_st(cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE, &bias_type,
                                              sizeof bias_type),
               CUBLAS_STATUS_SUCCESS, "bias type");
  }
  cublasLtMatrixLayout_t la = layout(in, ta ? k : m, ta ? m : k, lda),
                         lb = layout(in, tb ? n : k, tb ? k : n, ldb), lc = layout(out, m, n, ldc);
  cublasLtMatmulPreference_t pref = nullptr;
  cublasLtMatmulPreferenceCreate(&pref);
  const uint64_t ws = 1 << 20;
  check_st(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws,
                                                sizeof ws),
           CUBLAS_STATUS_SUCCESS, "pref");
  cublasLtMatmulHeuristicResult_t res{};
  int found = 0;
  const std::string what = "Lt " + name(in) + "->" + name(out) + (ta ? " T" : " N") +
                           (tb ? "T" : "N") + (with_bias ? " bias " + name(bt) : "");
  check_st(cublasLtMatmulAlgoGetHeuristic(lt, desc, la, lb, lc, lc, pref, 1, &res, &found),
           CUBLAS_STATUS_SUCCESS, what + " heuristic");
  check(found == 1 && res.state == CUBLAS_STATUS_SUCCESS, what + " heuristic result");
  check_st(cublasLtMatmul(lt, desc, &alpha, A.p(), la, B.p(), lb, &beta, C.p(), lc, C.p(), lc,
                          &res.algo, nullptr, 0, nullptr),
           CUBLAS_STATUS_SUCCESS, what);
  cudaDeviceSynchronize();  // queued work runs when waited for (emu_streams.h)
  for (int j = 0; j < n; ++j)
    for (int i = 0; i < m; ++i) {
      double mag;
      const double want = ref(A, lda, ta, B, ldb, tb, k, alpha, beta, C0.get(i + j * ldc),
                              with_bias ? bias.get(i) : 0, i, j, &mag);
      check(std::fabs(C.get(i + j * ldc) - want) <= tolerance(out, mag),
            what + " got " + std::to_string(C.get(i + j * ldc)) + " want " + std::to_string(want));
    }
  cublasLtMatmulPreferenceDestroy(pref);
  cublasLtMatrixLayoutDestroy(la), cublasLtMatrixLayoutDestroy(lb), cublasLtMatrixLayoutDestroy(lc);
  cublasLtMatmulDescDestroy(desc);
}

void test_lt(cublasLtHandle_t lt) {
  for (int ops = 0; ops < 4; ++ops) {
    lt_case(lt, CUDA_R_32F, CUDA_R_32F, ops & 1, ops & 2, false, -1, 1.0f, 0.0f);
    lt_case(lt, CUDA_R_32F, CUDA_R_32F, ops & 1, ops & 2, true, -1, 2.0f,
            1.0f);  // bias not scaled by alpha
    lt_case(lt, CUDA_R_16BF, CUDA_R_32F, ops & 1, ops & 2, true, -1, 1.0f, 0.0f);
    lt_case(lt, CUDA_R_16BF, CUDA_R_16BF, ops & 1, ops & 2, true, CUDA_R_32F, 1.0f,
            0.0f);  // fp32 bias, bf16 D
    lt_case(lt, CUDA_R_16F, CUDA_R_16F, ops & 1, ops & 2, true, -1, 1.0f,
            0.5f);  // fp16 bias by default
  }
}

void test_errors(cublasHandle_t h, cublasLtHandle_t lt) {
  PinnedVec<float> av(64), bv(64), cv(64);
  float *a = av.data(), *b = bv.data(), *c = cv.data();
  const float one = 1, zero = 0;
  auto gemm = [&](cublasOperation_t ta, int m, int n, int k, int lda, int ldb, int ldc,
                  cudaDataType_t ct, cublasComputeType_t comp) {
    return cublasGemmEx(h, ta, CUBLAS_OP_N, m, n, k, &one, a, CUDA_R_32F, lda, b, CUDA_R_32F, ldb,
                        &zero, c, ct, ldc, comp, CUBLAS_GEMM_DEFAULT);
  };
  check_st(gemm(CUBLAS_OP_N, 4, 2, 3, 3, 3, 4, CUDA_R_32F, CUBLAS_COMPUTE_32F),
           CUBLAS_STATUS_INVALID_VALUE, "lda < m");
  check_st(gemm(CUBLAS_OP_T, 4, 2, 3, 2, 3, 4, CUDA_R_32F, CUBLAS_COMPUTE_32F),
           CUBLAS_STATUS_INVALID_VALUE, "lda < k (T)");
  check_st(gemm(CUBLAS_OP_N, 4, 2, 3, 4, 2, 4, CUDA_R_32F, CUBLAS_COMPUTE_32F),
           CUBLAS_STATUS_INVALID_VALUE, "ldb < k");
  check_st(gemm(CUBLAS_OP_N, 4, 2, 3, 4, 3, 3, CUDA_R_32F, CUBLAS_COMPUTE_32F),
           CUBLAS_STATUS_INVALID_VALUE, "ldc < m");
  check_st(gemm(CUBLAS_OP_N, -1, 2, 3, 4, 3, 4, CUDA_R_32F, CUBLAS_COMPUTE_32F),
           CUBLAS_STATUS_INVALID_VALUE, "m < 0");
  check_st(gemm(CUBLAS_OP_C, 4, 2, 3, 4, 3, 4, CUDA_R_32F, CUBLAS_COMPUTE_32F),
           CUBLAS_STATUS_NOT_SUPPORTED, "op C");
  check_st(gemm(CUBLAS_OP_N, 4, 2, 3, 4, 3, 4, CUDA_R_16BF, CUBLAS_COMPUTE_32F_FAST_16BF),
           CUBLAS_STATUS_NOT_SUPPORTED, "fp32 in, bf16 out, fast");
  check_st(gemm(CUBLAS_OP_N, 4, 2, 3, 4, 3, 4, CUDA_R_32F, CUBLAS_COMPUTE_64F),
           CUBLAS_STATUS_NOT_SUPPORTED, "64F");
  check_st(gemm(CUBLAS_OP_N, 0, 0, 0, 1, 1, 1, CUDA_R_32F, CUBLAS_COMPUTE_32F),
           CUBLAS_STATUS_SUCCESS, "empty");
  // Lt: a layout that disagrees with D, a wrong attribute size, an unsupported epilogue.
  cublasLtMatmulDesc_t desc = nullptr;
  cublasLtMatmulDescCreate(&desc, CUBLAS_COMPUTE_32F, CUDA_R_32F);
  const int64_t wrong = CUBLAS_OP_T;
  check_st(cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_TRANSA, &wrong, sizeof wrong),
           CUBLAS_STATUS_INVALID_VALUE, "attribute size");
  cublasLtMatrixLayout_t la = layout(CUDA_R_32F, 4, 3, 4), lb = layout(CUDA_R_32F, 3, 2, 3),
                         lbad = layout(CUDA_R_32F, 4, 2, 4), lc = layout(CUDA_R_32F, 4, 2, 4),
                         lshort = layout(CUDA_R_32F, 4, 3, 3);
  check_st(cublasLtMatmul(lt, desc, &one, a, la, b, lbad, &zero, c, lc, c, lc, nullptr, nullptr, 0,
                          nullptr),
           CUBLAS_STATUS_INVALID_VALUE, "Lt k mismatch");
  cudaDeviceSynchronize();  // queued work runs when waited for (emu_streams.h)
  check_st(cublasLtMatmul(lt, desc, &one, a, lshort, b, lb, &zero, c, lc, c, lc, nullptr, nullptr,
                          0, nullptr),
           CUBLAS_STATUS_INVALID_VALUE, "Lt ld < rows");
  cudaDeviceSynchronize();  // queued work runs when waited for (emu_streams.h)
  check_st(cublasLtMatmul(lt, desc, &one, a, la, b, lb, &zero, c, lc, c, lc, nullptr, nullptr, 0,
                          nullptr),
           CUBLAS_STATUS_SUCCESS, "Lt ok");
  cudaDeviceSynchronize();  // queued work runs when waited for (emu_streams.h)
  const uint32_t relu = CUBLASLT_EPILOGUE_RELU;
  cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_EPILOGUE, &relu, sizeof relu);
  cublasLtMatmulPreference_t pref = nullptr;
  cublasLtMatmulPreferenceCreate(&pref);
  cublasLtMatmulHeuristicResult_t res{};
  int found = -1;
  check_st(cublasLtMatmulAlgoGetHeuristic(lt, desc, la, lb, lc, lc, pref, 1, &res, &found),
           CUBLAS_STATUS_NOT_SUPPORTED, "relu epilogue");
  check(found == 0, "no algorithm for relu");
  for (auto l : {la, lb, lbad, lc, lshort}) cublasLtMatrixLayoutDestroy(l);
  cublasLtMatmulPreferenceDestroy(pref);
  cublasLtMatmulDescDestroy(desc);
}

void test_speed(cublasHandle_t h) {
  const int s = 512;
  PinnedVec<float> a(size_t(s) * s, 0.5f), b(size_t(s) * s, 0.25f), c(size_t(s) * s, kNaN);
  const float one = 1, zero = 0;
  const auto t0 = std::chrono::steady_clock::now();
  cublasGemmEx(h, CUBLAS_OP_N, CUBLAS_OP_T, s, s, s, &one, a.data(), CUDA_R_32F, s, b.data(),
               CUDA_R_32F, s, &zero, c.data(), CUDA_R_32F, s, CUBLAS_COMPUTE_32F,
               CUBLAS_GEMM_DEFAULT);
  cudaDeviceSynchronize();  // queued work runs when waited for (emu_streams.h)
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  std::printf("512^3 GEMM: %.3f s\n", secs);
  check(c[12345] == 0.125f * s, "512^3 GEMM value");  // the time is printed, never asserted
}

}  // namespace

int main() {
  cublasHandle_t h = nullptr;
  cublasLtHandle_t lt = nullptr;
  check_st(cublasCreate(&h), CUBLAS_STATUS_SUCCESS, "create");
  check_st(cublasSetMathMode(h, cublasMath_t(CUBLAS_DEFAULT_MATH |
                                             CUBLAS_MATH_DISALLOW_REDUCED_PRECISION_REDUCTION)),
           CUBLAS_STATUS_SUCCESS, "math mode");
  check_st(cublasLtCreate(&lt), CUBLAS_STATUS_SUCCESS, "lt create");
  test_gemm_ex(h);
  test_fast_compute(h);
  test_batched(h);
  test_lt(lt);
  test_errors(h, lt);
  test_speed(h);
  cublasLtDestroy(lt);
  cublasDestroy(h);
  std::printf(failures ? "emu_blas selftest: %d FAILED\n" : "emu_blas selftest: all passed\n",
              failures);
  return failures ? 1 : 0;
}
