// 16-bit FFN activations on the GPU (ops.h, Ops::half_activations; CPU twins in
// src/cpu/cpu_half_activations.cc). The pre-activation is written by the FFN's first GEMM
// straight into its 16-bit buffer (cuBLASLt's bias epilogue with a 16-bit D, as
// gemm_bias_kept), the GELU reads it there, and the backward reads it and d(act)'s kept copy:
// 2 bytes per element each way where the fp32-stored path moves 4.
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
                               : kern::half_to_float(kern::float_to_half(dact[i], format), format);
        const float g = kern::gelu_grad(d, kern::half_to_float(pre[i], format), form);
        if (h)
          h[i] = kern::float_to_half(g, format);
        else
          dpre[i] = g;
        v[0] = g;
      },
      dbias, nullptr);
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
  if (uint16_t* h = kept_output(y, n)) {
    launch_map(n, stream(), [=] __device__(size_t i) {
      h[i] = kern::float_to_half(kern::gelu(kern::half_to_float(x[i], format), form), format);
    });
    return;
  }
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

}  // namespace lansbert::cuda
