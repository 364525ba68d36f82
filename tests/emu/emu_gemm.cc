// The emulator's GEMM loop and argument rules (emu_gemm.h).
#include "emu_gemm.h"

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <string>
#include <utility>
#include <vector>

#include "emu_state.h"

namespace emu::blas {

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

// op(A) is gathered once into an fp32 k x m panel (row p = column p of op(A)), so the inner
// loop runs over contiguous memory and vectorises; one column of D is accumulated at a time.
// A column of C is read before the same column of D is written, so C == D (same ld) is safe.
namespace {
float gelu_tanh_textbook(float x) {
  return 0.5f * x * (1.0f + std::tanh(0.7978845608f * (x + 0.044715f * x * x * x)));
}
float gelu_tanh_slope(float x) {
  const float t = std::tanh(0.7978845608f * (x + 0.044715f * x * x * x));
  return 0.5f * (1.0f + t) + 0.5f * x * (1.0f - t * t) * 0.7978845608f * (1.0f + 0.134145f * x * x);
}
}  // namespace

void run_gemm(const Gemm& g) {
  const int64_t m = g.m, n = g.n, k = g.k;
  std::vector<double> bias_grad(g.epilogue == Epilogue::kDGelu ? size_t(m) : 0, 0.0);
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
      if (g.epilogue == Epilogue::kDGelu) {  // the bias pointer is the gradient's output
        v *= gelu_tanh_slope(load(g.aux, g.d_type, i + j * g.aux_ld));
        bias_grad[size_t(i)] += v;
      } else if (g.bias) {
        v += load(g.bias, g.bias_type, i);
      }
      if (g.epilogue == Epilogue::kGeluAux) {
        store(g.aux, g.d_type, i + j * g.aux_ld, v);
        v = gelu_tanh_textbook(v);
      }
      store(g.d, g.d_type, i + j * g.ldd, v);
    }
  }
  for (int64_t i = 0; i < int64_t(bias_grad.size()); ++i)
    store(const_cast<void*>(g.bias), g.bias_type, i, float(bias_grad[size_t(i)]));
}

void check_operands(const char* what, const void* a, const void* b, const void* c, const void* d,
                    const void* bias) {
  for (auto [name, p] : {std::pair{"A", a}, std::pair{"B", b}, std::pair{"C", c}, std::pair{"D", d},
                         std::pair{"bias", bias}})
    emu::check_device_pointer(std::string(what) + " " + name, p);
}

}  // namespace emu::blas
