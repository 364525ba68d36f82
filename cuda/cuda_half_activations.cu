// 16-bit FFN activations on the GPU (ops.h, Ops::half_activations; CPU twins in
// src/cpu/cpu_half_activations.cc), and the ends of the 16-bit gradient stream. The
// pre-activation is written by the FFN's first GEMM straight into its 16-bit buffer (cuBLASLt's
// bias epilogue with a 16-bit D, as gemm_bias_kept), the GELU reads it there, and the backward
// reads it and d(act)'s kept copy: 2 bytes per element each way where the fp32-stored path
// moves 4.
#include "cuda_ops.cuh"
#include "lansbert/kernels/activations.h"
#include "lansbert/kernels/half.h"
#include "launch.cuh"

namespace lansbert::cuda {

namespace {

// d(pre) = gelu'(pre) d(act), with its column sums into dbias; d(act) from its 16-bit copy
// (dact16) or, where none is kept, from fp32 rounded here; d(pre) into its copy (h) or fp32.
// A free function: an extended __device__ lambda may not live in a private member.
void half_gelu_backward_pass(const float* dact, const uint16_t* dact16, const uint16_t* pre, float* dpre,
                             uint16_t* h, float* dbias, int rows, int cols, kern::HalfFormat format,
                             kern::GeluForm form, cudaStream_t s, DeviceBytes& partials) {
  launch_column_sums<1>(
      rows, cols, s, partials,
      [=] __device__(int r, int c, float* v) {
        const size_t i = size_t(r) * cols + c;
        const float d = dact16 ? kern::half_to_float(dact16[i], format)
                               : kern::round_to_half(dact[i], format);
        const float g = kern::gelu_grad(d, kern::half_to_float(pre[i], format), form);
        if (h)
          h[i] = kern::float_to_half(g, format);
        else
          dpre[i] = g;
        v[0] = g;
      },
      dbias, nullptr);
}

// The GELU epilogues' part of an LtBiasMatmul call: D (16-bit, [m, n] row-major) and aux
// beside it, with the bias (or the bias gradient's output).
void gelu_epilogue(LtBiasMatmul::Call* call, LtBiasMatmul::Epilogue e, const float* bias, uint16_t* d, uint16_t* aux,
                   cudaDataType_t type) {
  call->epilogue = e;
  call->bias = bias;
  call->c = d;
  call->c_type = type;
  call->ldc = call->n;
  call->aux = aux;
}

// h = gelu(x widened), rounded: the GELU output written only as its kept copy.
void gelu_half_into(const uint16_t* x, uint16_t* h, size_t n, kern::HalfFormat format, kern::GeluForm form,
                    cudaStream_t s) {
  launch_map(n, s, [=] __device__(size_t i) {
    h[i] = kern::float_to_half(kern::gelu(kern::half_to_float(x[i], format), form), format);
  });
}

// dbias += column sums of a 16-bit tensor (a kept copy, x16), or of fp32 x rounded to 16 bits.
void half_column_sums(const float* x, const uint16_t* x16, float* dbias, int rows, int cols, kern::HalfFormat format,
                      cudaStream_t s, DeviceBytes& partials) {
  launch_column_sums<1>(
      rows, cols, s, partials,
      [=] __device__(int r, int c, float* v) {
        const size_t i = size_t(r) * cols + c;
        v[0] = kern::half_to_float(x16 ? x16[i] : kern::float_to_half(x[i], format), format);
      },
      dbias, nullptr);
}

}  // namespace

// d(q, k, v) from the flash backward's copies: 2 bytes a element read instead of 4.
void CudaOps::bias_add_backward_of_kept(const float* dy, float* dbias, int rows, int cols) {
  if (!converts_operands()) return bias_add_backward(dy, dbias, rows, cols);
  const uint16_t* copy = nullptr;
  if (kept_outputs_unwritten()) {
    copy = kept_copy_of(dy, size_t(rows) * cols);
    LB_CHECK_MSG(copy != nullptr, "bias_add_backward_of_kept: the gradient has no kept 16-bit copy");
  }
  half_column_sums(dy, copy, dbias, rows, cols, gemm_half_format(options_.math), stream(), column_partials_);
}

void CudaOps::gemm_bias_half(Trans ta, Trans tb, int m, int n, int k, const float* a, int lda, const float* b,
                             int ldb, const float* bias, float* scratch, uint16_t* out) {
  LB_CHECK_MSG(half_activations(), "gemm_bias_half: 16-bit activations need bf16/fp16 GEMMs with gemm_cast kernel");
  gemm_bias_into(ta, tb, m, n, k, a, lda, b, ldb, bias, scratch, n, out);
}

void CudaOps::gelu_forward_half_kept(const uint16_t* x, float* y, size_t n) {
  LB_CHECK_MSG(half_activations(), "gelu_forward_half_kept: 16-bit activations need bf16/fp16 GEMMs");
  const kern::HalfFormat format = gemm_half_format(options_.math);
  const kern::GeluForm form = gelu_form_;
  if (uint16_t* h = kept_output(y, n)) return gelu_half_into(x, h, n, format, form, stream());
  launch_map(n, stream(), [=] __device__(size_t i) { y[i] = kern::gelu(kern::half_to_float(x[i], format), form); });
  keep_gemm_operand(y, n);
}

void CudaOps::bias_gelu_backward_half_kept(const float* dact, const uint16_t* pre, float* dpre, float* dbias,
                                           int rows, int cols) {
  LB_CHECK_MSG(half_activations(), "bias_gelu_backward_half_kept: 16-bit activations need bf16/fp16 GEMMs");
  const size_t n = size_t(rows) * cols;
  const uint16_t* dact16 = nullptr;
  if (kept_outputs_unwritten()) {
    dact16 = kept_copy_of(dact, n);
    LB_CHECK_MSG(dact16 != nullptr, "bias_gelu_backward_half_kept: d(act) has no kept 16-bit copy");
  }
  // Where dpre aliases dact this re-keeps the same span: the same store, read and written
  // element by element in place.
  uint16_t* h = kept_output(dpre, n);
  half_gelu_backward_pass(dact, dact16, pre, dpre, h, dbias, rows, cols, gemm_half_format(options_.math), gelu_form_,
                          stream(), column_partials_);
  if (!h) keep_gemm_operand(dpre, n);
}

// The tanh GELU in the FFN's GEMMs (ops.h): D is the kept copy the unfused kernels would write
// (act's, d(pre)'s), aux the 16-bit pre-activation. Where cuBLASLt refuses a call, or its
// first result disagreed with the unfused kernels, the same outputs come from those kernels.
void CudaOps::gemm_bias_gelu_half(Trans ta, Trans tb, int m, int n, int k, const float* a, int lda, const float* b,
                                  int ldb, const float* bias, float* scratch, uint16_t* pre, float* act) {
  LB_CHECK_MSG(half_activations(), "gemm_bias_gelu_half: 16-bit activations need bf16/fp16 GEMMs");
  const bool fuse = gelu_form_ == kern::GeluForm::kTanh && gelu_epilogue_[0] != Checked::kDisagrees && m > 0 &&
                    n > 0;
  uint16_t* act16 = fuse ? kept_output(act, size_t(m) * n) : nullptr;
  if (!act16) return Ops<float>::gemm_bias_gelu_half(ta, tb, m, n, k, a, lda, b, ldb, bias, scratch, pre, act);
  LtBiasMatmul::Call call = lt_call(ta, tb, m, n, k, a, lda, b, ldb);
  gelu_epilogue(&call, LtBiasMatmul::Epilogue::kGeluAuxBias, bias, act16, pre, half_type());
  if (lt_.run(call, stream()) && gelu_epilogue_agrees(call)) {
    ++fused_gelu_gemms_;
    return;
  }
  ++unfused_gelu_gemms_;
  gemm_bias_into(ta, tb, m, n, k, a, lda, b, ldb, bias, scratch, n, pre);
  gelu_half_into(pre, act16, size_t(m) * n, gemm_half_format(options_.math), gelu_form_, stream());
}

// The bias gradient comes out of the epilogue written, not accumulated: into bias_grad_, then
// added to dbias (micro-steps accumulate there).
void CudaOps::gemm_dgelu_bias_half(Trans ta, Trans tb, int m, int n, int k, const float* a, int lda, const float* b,
                                   int ldb, const uint16_t* pre, float* dpre, float* dbias) {
  LB_CHECK_MSG(half_activations(), "gemm_dgelu_bias_half: 16-bit activations need bf16/fp16 GEMMs");
  const bool fuse = gelu_form_ == kern::GeluForm::kTanh && gelu_epilogue_[1] != Checked::kDisagrees && m > 0 &&
                    n > 0;
  uint16_t* d16 = fuse ? kept_output(dpre, size_t(m) * n) : nullptr;
  if (!d16) return Ops<float>::gemm_dgelu_bias_half(ta, tb, m, n, k, a, lda, b, ldb, pre, dpre, dbias);
  bias_grad_.reserve(size_t(n) * sizeof(float));
  float* bias_grad = static_cast<float*>(bias_grad_.get());
  LtBiasMatmul::Call call = lt_call(ta, tb, m, n, k, a, lda, b, ldb);
  // (DGELU reads its aux: the const is cast away for the Call's one pointer type only.)
  gelu_epilogue(&call, LtBiasMatmul::Epilogue::kDGeluBgrad, bias_grad, d16, const_cast<uint16_t*>(pre), half_type());
  if (lt_.run(call, stream()) && gelu_epilogue_agrees(call)) {
    ++fused_gelu_gemms_;
    accumulate(dbias, bias_grad, size_t(n));
    return;
  }
  ++unfused_gelu_gemms_;
  // d(act) into the copy, then the GELU backward over it in place (gemm_kept, then
  // bias_gelu_backward_half_kept: the default's kernels on the copy already made).
  gemm_ex(ta, tb, m, n, k, 1.0f, call.a, call.a_type, lda, call.b, call.b_type, ldb, 0.0f, d16, half_type(), n);
  half_gelu_backward_pass(nullptr, d16, pre, nullptr, d16, dbias, m, n, gemm_half_format(options_.math), gelu_form_,
                          stream(), column_partials_);
}

// (Free functions for the lambdas, as above.)
void widen_half(const uint16_t* h, float* x, size_t n, kern::HalfFormat format, cudaStream_t s) {
  launch_map(n, s, [=] __device__(size_t i) { x[i] = kern::half_to_float(h[i], format); });
}
void round_half_into(const float* x, float* out, size_t n, kern::HalfFormat format, cudaStream_t s) {
  launch_map(n, s, [=] __device__(size_t i) { out[i] = kern::round_to_half(x[i], format); });
}

// The gradient stream's ends (ops.h): rounded in place where it is stored in fp32, widened out
// of its copy where it is held as one.
void CudaOps::round_to_gemm_half(float* x, size_t n) {
  LB_CHECK_MSG(converts_operands(), "round_to_gemm_half: needs bf16/fp16 GEMMs with lansbert's casts");
  if (n) round_half_into(x, x, n, gemm_half_format(options_.math), stream());
}

void CudaOps::widen_kept(float* x, size_t n) {
  if (n == 0) return;
  const uint16_t* h = kept_copy_of(x, n);
  LB_CHECK_MSG(h, "widen_kept: x has no kept copy");
  widen_half(h, x, n, gemm_half_format(options_.math), stream());
}

}  // namespace lansbert::cuda
