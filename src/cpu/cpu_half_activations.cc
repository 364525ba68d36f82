// 16-bit activations on the CPU (ops.h, Ops::half_activations; the FFN, and the residual
// stream's residual_layernorm_forward and, for sums and gradients in 16 bits, its backward,
// with the gradient stream's ends): the twins of cuda/cuda_half_activations.cu and
// cuda/cuda_layernorm.cu. The 16-bit buffers hold real
// bf16/fp16 bits (kern::half.h), as on the device; values are widened into T scratch and the
// existing fp32 passes run on them, so the arithmetic is the same expressions in the same
// order as the fp32-stored path, only on rounded inputs.
#include <algorithm>

#include "cpu_ops_impl.h"

namespace lansbert::cpu {

template <typename T>
void CpuOps<T>::gemm_bias_half(Trans ta, Trans tb, int m, int n, int k, const T* a, int lda, const T* b, int ldb,
                               const T* bias, T* scratch, uint16_t* out) {
  LB_CHECK_MSG(half_activations(), "gemm_bias_half: 16-bit activations need bf16/fp16 GEMMs");
  if (m <= 0 || n <= 0) return;
  // The fp32 result (accumulator plus bias, as gemm_bias computes it) in scratch, then rounded
  // once: what cuBLASLt's epilogue writes into a 16-bit D.
  this->gemm_bias(ta, tb, m, n, k, a, lda, b, ldb, bias, scratch, n);
  const size_t count = size_t(m) * n;
  kern::with_half_format(gemm_half_format(math_), [&](auto F) {
#pragma omp parallel for schedule(static) if (worth_threads(count))
    for (size_t i = 0; i < count; ++i) out[i] = kern::float_to_half(static_cast<float>(scratch[i]), F);
  });
}

template <typename T>
void CpuOps<T>::gelu_forward_half_kept(const uint16_t* x, T* y, size_t n) {
  LB_CHECK_MSG(half_activations(), "gelu_forward_half_kept: 16-bit activations need bf16/fp16 GEMMs");
  if (half_scratch_.size() < n) half_scratch_.resize(n);
  widen_half(x, n, half_scratch_.data());
  gelu_forward_kept(half_scratch_.data(), y, n);
}

template <typename T>
void CpuOps<T>::bias_gelu_backward_half_kept(const T* dact, const uint16_t* pre, T* dpre, T* dbias, int rows,
                                             int cols) {
  LB_CHECK_MSG(half_activations(), "bias_gelu_backward_half_kept: 16-bit activations need bf16/fp16 GEMMs");
  const size_t n = size_t(rows) * cols;
  if (half_scratch_.size() < n) half_scratch_.resize(n);
  widen_half(pre, n, half_scratch_.data());
  // dact at its rounding: the kept copy where outputs are unwritten (its fp32 memory holds
  // nothing; where dpre aliases dact, d(pre)'s copy is that same store, read and written
  // element by element in place, as on the device), rounded into a scratch otherwise.
  if (kept_outputs_unwritten())
    return bias_gelu_backward_kept(kept_copy_of(dact, n), half_scratch_.data(), dpre, dbias, rows, cols);
  if (grad_scratch_.size() < n) grad_scratch_.resize(n);
  round_values(dact, n, grad_scratch_.data());
  bias_gelu_backward_kept(grad_scratch_.data(), half_scratch_.data(), dpre, dbias, rows, cols);
}

template <typename T>
void CpuOps<T>::bias_add_backward_of_kept(const T* dy, T* dbias, int rows, int cols) {
  // The copy holds the rounded values as T: the same sums, in the same order, the device's
  // kernel takes over its 16-bit copy; without copies dy is rounded here (into scratch).
  const size_t n = size_t(rows) * cols;
  if (!is_half_gemm(math_)) return bias_add_backward(dy, dbias, rows, cols);
  if (kept_outputs_unwritten()) return bias_add_backward(kept_copy_of(dy, n), dbias, rows, cols);
  if (grad_scratch_.size() < n) grad_scratch_.resize(n);
  round_values(dy, n, grad_scratch_.data());
  bias_add_backward(grad_scratch_.data(), dbias, rows, cols);
}

template <typename T>
void CpuOps<T>::residual_layernorm_forward(const ResidualLayerNorm<T>& a) {
  if (!a.residual_half && !a.out_copy_only && !a.sum_half && !a.sum_copy_only)
    return Ops<T>::residual_layernorm_forward(a);
  LB_CHECK_MSG(half_activations() && (!a.out_copy_only || (a.keep_out && kept_outputs_unwritten())) &&
                   (!a.sum_copy_only || (a.sum_half && kept_outputs_unwritten())),
               "residual_layernorm_forward: 16-bit residuals need 16-bit GEMMs (and kept copies for out_copy_only "
               "and sum_copy_only)");
  const size_t n = size_t(a.rows) * a.cols;
  // A copy holds the residual's rounded values as T, the bits the device kernel widens;
  // without one the residual is rounded into scratch (the same values).
  const T* residual = a.residual;
  if (a.residual_half) {
    size_t offset = 0;
    const std::vector<T>* copy = kept_.find(a.residual, n, &offset);
    if (copy) {
      residual = copy->data() + offset;
    } else {
      if (grad_scratch_.size() < n) grad_scratch_.resize(n);
      round_values(a.residual, n, grad_scratch_.data());
      residual = grad_scratch_.data();
    }
  }
  // The sum: in y, or with sum_copy_only in y's copy (the GEMM's rounded output) as the kernel
  // rewrites the 16-bit copy in place; with sum_half y is used rounded and the sum is rounded
  // where it is stored, so the LayerNorm reads the rounded sums.
  T* sum = a.y;
  if (a.sum_copy_only) {
    size_t offset = 0;
    LB_CHECK_MSG(kept_.find(a.y, n, &offset) && offset == 0,
                 "residual_layernorm_forward: sum_copy_only needs y kept by the GEMM that wrote it (gemm_kept)");
    sum = sized_copy(a.y, n).data();  // kept again: its contents change
  } else if (a.sum_half) {
    round_values(sum, n, sum);
  }
  bias_dropout_residual_forward(sum, a.bias, residual, a.rows, a.cols, a.p, a.key);
  if (a.sum_half) round_values(sum, n, sum);
  if (!a.out_copy_only) {
    if (a.keep_out)
      layernorm_forward_kept(sum, a.gamma, a.beta, a.out, a.mean, a.rstd, a.rows, a.cols, a.eps);
    else
      layernorm_forward(sum, a.gamma, a.beta, a.out, a.mean, a.rstd, a.rows, a.cols, a.eps);
    return;
  }
  // Into the copy's store and rounded there, out left unwritten (as the kernel leaves it).
  std::vector<T>* copy = kept_output(a.out, n);
  layernorm_forward(sum, a.gamma, a.beta, copy->data(), a.mean, a.rstd, a.rows, a.cols, a.eps);
  round_values(copy->data(), n, copy->data());
}

// The default's two ops on 16-bit inputs: the sums from their kept copy (sum_copy_only), d(out)
// from its copy (grad_copy_only) or rounded into scratch (grad_half); d(sum) into dsum's copy
// store or into dsum, rounded there before the dropout-bias backward reads it.
template <typename T>
void CpuOps<T>::residual_layernorm_backward(const ResidualLayerNormGrad<T>& g) {
  if (!g.sum_copy_only && !g.grad_half && !g.grad_copy_only) return Ops<T>::residual_layernorm_backward(g);
  LB_CHECK_MSG(half_activations() && (!g.grad_copy_only || (g.grad_half && kept_outputs_unwritten())) &&
                   (!g.sum_copy_only || kept_outputs_unwritten()),
               "residual_layernorm_backward: 16-bit sums and gradients need 16-bit GEMMs (and kept copies for "
               "sum_copy_only and grad_copy_only)");
  const size_t n = size_t(g.rows) * g.cols;
  T* dsum = g.dsum;
  if (g.grad_copy_only) dsum = kept_output(g.dsum, n)->data();
  const T* sum = g.sum_copy_only ? kept_copy_of(g.sum, n) : g.sum;
  const T* dout = g.dout;
  if (g.grad_copy_only) {
    dout = kept_copy_of(g.dout, n);
  } else if (g.grad_half) {
    if (grad_scratch_.size() < n) grad_scratch_.resize(n);
    round_values(g.dout, n, grad_scratch_.data());
    dout = grad_scratch_.data();
  }
  layernorm_backward(dout, sum, g.gamma, g.mean, g.rstd, dsum, g.dgamma, g.dbeta, g.rows, g.cols);
  if (g.grad_half) round_values(dsum, n, dsum);
  dropout_bias_backward_kept(dsum, g.dy, g.dbias, g.rows, g.cols, g.p, g.key);
}

template <typename T>
void CpuOps<T>::round_to_gemm_half(T* x, size_t n) {
  LB_CHECK_MSG(half_activations(), "round_to_gemm_half: needs bf16/fp16 GEMMs");
  round_values(x, n, x);
}

template <typename T>
void CpuOps<T>::widen_kept(T* x, size_t n) {
  const T* copy = kept_copy_of(x, n);
  std::copy(copy, copy + n, x);
}

template class CpuOps<float>;
template class CpuOps<double>;

}  // namespace lansbert::cpu
