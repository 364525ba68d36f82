// CpuOps<T>: the CPU implementation of Ops<T>. The methods are defined by topic in the
// cpu_*.cc files beside this header, each instantiated for float and double.
#pragma once

#include <vector>

#include "lansbert/backend/cpu_ops.h"
#include "lansbert/backend/kept_operands.h"

namespace lansbert::cpu {

template <typename T>
class CpuOps final : public Ops<T> {
 public:
  explicit CpuOps(GemmMath math = GemmMath::kFp32, bool reuse_casts = true,
                  AttentionMode attention = AttentionMode::kNative);
  Allocator& allocator() override { return host_allocator(); }
  void zero(T* p, size_t n) override;

  void gemm(Trans ta, Trans tb, int m, int n, int k, T alpha, const T* a, int lda, const T* b,
            int ldb, T beta, T* c, int ldc) override;
  void gemm_batched(Trans ta, Trans tb, int m, int n, int k, T alpha, const T* a, int lda,
                    const T* b, int ldb, T beta, T* c, int ldc, const GemmBatch& batch) override;
  // The twins of CudaOps' GEMMs with a 16-bit output: computed into a scratch, not into c,
  // so that anything reading c's fp32 values fails here as it would on the GPU.
  void gemm_kept(Trans ta, Trans tb, int m, int n, int k, const T* a, int lda, const T* b, int ldb, T* c,
                 int ldc) override;
  void gemm_bias_kept(Trans ta, Trans tb, int m, int n, int k, const T* a, int lda, const T* b, int ldb,
                      const T* bias, T* c, int ldc) override;
  void gemm_batched_kept(Trans ta, Trans tb, int m, int n, int k, const T* a, int lda, const T* b, int ldb, T* c,
                         int ldc, const GemmBatch& batch) override;
  // Into the copy's store with beta 1 (it holds the rounded values), then rounded there.
  void gemm_accumulate_kept(Trans ta, Trans tb, int m, int n, int k, const T* a, int lda, const T* b, int ldb,
                            T* c, int ldc) override;
  void keep_gemm_operand(const T* x, size_t n) override;
  void keep_converted_gemm_operand(const T* x, size_t n, const uint16_t* converted,
                                   kern::HalfFormat format) override;
  void drop_gemm_operand(const T* x) override;
  size_t gemm_operand_conversions() const override { return conversions_; }
  // 2 bytes per element, as on a device (the emulation stores them as T).
  size_t kept_copy_bytes() const override {
    return 2 * kept_.held([](const std::vector<T>& v) { return v.size(); });
  }

  void bias_add_forward(T* y, const T* bias, int rows, int cols) override;
  void bias_add_backward(const T* dy, T* dbias, int rows, int cols) override;
  void add_forward(const T* a, const T* b, T* y, size_t n) override;
  void accumulate(T* dst, const T* src, size_t n) override;

  void layernorm_forward(const T* x, const T* gamma, const T* beta, T* y, T* mean, T* rstd,
                         int rows, int cols, T eps) override;
  void layernorm_backward(const T* dy, const T* x, const T* gamma, const T* mean, const T* rstd,
                          T* dx, T* dgamma, T* dbeta, int rows, int cols) override;

  void bias_gelu_forward(T* pre, const T* bias, T* act, int rows, int cols) override;
  void gelu_forward_kept(const T* x, T* y, size_t n) override;
  // cpu_half_activations.cc: 16-bit activations (twins of cuda_half_activations.cu).
  bool half_activations() const override { return is_half_gemm(math_); }
  bool attention_keeps_input_gradients() const override {
    return attention_ == AttentionMode::kFlash && is_half_gemm(math_);
  }
  void bias_add_backward_of_kept(const T* dy, T* dbias, int rows, int cols) override;
  void gemm_bias_half(Trans ta, Trans tb, int m, int n, int k, const T* a, int lda, const T* b, int ldb,
                      const T* bias, T* scratch, uint16_t* out) override;
  void gelu_forward_half_kept(const uint16_t* x, T* y, size_t n) override;
  void bias_gelu_backward_half_kept(const T* dact, const uint16_t* pre, T* dpre, T* dbias, int rows,
                                    int cols) override;
  // cpu_flash_attention.cc: the flash attention's twin with attention kFlash, the
  // hand-written composition otherwise. The flash one reads q, k, v, ctx and d(ctx) in T, or
  // their kept copies where copies are kept.
  AttentionImpl attention_forward(const AttentionForward<T>& a) override;
  void attention_backward(const AttentionBackward<T>& a) override;
  bool attention_reads_only_gemm_operands() const override {
    return attention_ != AttentionMode::kFlash || kept_outputs_unwritten();
  }
  // The twin runs for every shape (the CUDA kernels need 16-bit GEMMs and head_dim 64).
  bool attention_runs_flash(int) const override { return attention_ == AttentionMode::kFlash; }
  bool kept_outputs_unwritten() const override { return math_ != GemmMath::kFp32 && reuse_casts_; }
  // The residual read from its kept copy, out written only as its copy (ResidualLayerNorm's
  // 16-bit flags); otherwise the composition.
  void residual_layernorm_forward(const ResidualLayerNorm<T>& a) override;
  void residual_layernorm_backward(const ResidualLayerNormGrad<T>& g) override;
  void round_to_gemm_half(T* x, size_t n) override;
  void widen_kept(T* x, size_t n) override;
  void layernorm_forward_kept(const T* x, const T* gamma, const T* beta, T* y, T* mean, T* rstd, int rows, int cols,
                              T eps) override;
  void dropout_bias_backward_kept(const T* dy, T* dx, T* dbias, int rows, int cols, float p, RngKey key) override;
  void bias_gelu_backward_kept(const T* dact, const T* pre, T* dpre, T* dbias, int rows, int cols) override;
  void bias_add_backward_kept(const T* dy, T* dbias, int rows, int cols) override;
  void dropout_forward_kept(const T* x, T* y, size_t n, float p, RngKey key) override;
  size_t gemm_operand_copy_writes() const override { return copy_writes_; }
  void bias_gelu_backward(const T* dact, const T* pre, T* dpre, T* dbias, int rows, int cols) override;
  void bias_dropout_residual_forward(T* y, const T* bias, const T* residual, int rows, int cols, float p,
                                     RngKey key) override;
  void dropout_bias_backward(const T* dy, T* dx, T* dbias, int rows, int cols, float p, RngKey key) override;

  void gelu_forward(const T* x, T* y, size_t n) override;
  void gelu_backward(const T* dy, const T* x, T* dx, size_t n) override;
  void tanh_forward(const T* x, T* y, size_t n) override;
  void tanh_backward(const T* dy, const T* y, T* dx, size_t n) override;
  void dropout_forward(const T* x, T* y, size_t n, float p, RngKey key) override;
  void dropout_backward(const T* dy, T* dx, size_t n, float p, RngKey key) override;

  void softmax_forward(const T* scores, const int32_t* key_mask, T* probs, int batch, int heads,
                       int seq, T scale) override;
  void softmax_backward(const T* dprobs, const T* probs, T* dscores, int batch, int heads,
                        int seq, T scale) override;
  void softmax_dropout_forward(const T* scores, const int32_t* key_mask, T* probs, T* probs_drop, int batch,
                               int heads, int seq, T scale, float p, RngKey key) override;
  void dropout_softmax_backward(T* dprobs_drop, const T* probs, T* dscores, int batch, int heads, int seq,
                                T scale, float p, RngKey key) override;
  void softmax_dropout_forward_kept(const T* scores, const int32_t* key_mask, T* probs, T* probs_drop, int batch,
                                    int heads, int seq, T scale, float p, RngKey key) override;
  void softmax_backward_kept(T* dprobs, const T* probs, T* dscores, int batch, int heads, int seq, T scale, float p,
                             RngKey key) override;

  void embedding_forward(const int32_t* ids, const T* table, T* out, int n, int dim,
                         bool accumulate) override;
  void embedding_backward(const int32_t* ids, const T* dout, T* dtable, int n, int dim) override;
  void gather_rows_forward(const T* src, const int32_t* index, T* dst, int n, int dim) override;
  void gather_rows_backward(const T* ddst, const int32_t* index, T* dsrc, int n, int dim) override;

  void cross_entropy_forward(const T* logits, const int32_t* labels, T* losses, int32_t* correct,
                             int rows, int classes) override;
  void cross_entropy_backward(const T* logits, const int32_t* labels, T* dlogits, int rows,
                              int classes, T weight) override;

 private:
  // With math_ kBf16/kFp16: a copy of the first n elements of x, rounded to the operand
  // format, in `scratch` (grown as needed); otherwise x itself.
  // A kept span's copy is served where the operand lies inside it.
  const T* operand(const T* x, size_t n, std::vector<T>& scratch);
  // x[0, n) rounded to the operand format into out (out may be x), counted in conversions_
  // (round_into: a cast pass on the GPU) or not (round_values: a kernel's 16-bit output).
  void round_into(const T* x, size_t n, T* out);
  void round_values(const T* x, size_t n, T* out) const;
  // x as a GEMM operand: rounded to the 16-bit format where GEMMs are 16-bit, else x.
  T gemm_rounded(T x) const;
  // x[0, n)'s kept copy (at x's offset); fatal where none is kept.
  const T* kept_copy_of(const T* x, size_t n) const;
  void flash_attention_forward(const AttentionForward<T>& a);
  void flash_attention_backward(const AttentionBackward<T>& a);
  // The copy an op writes a kept operand into (the *_kept ops): x[0, n) kept, its store
  // sized; null where GEMMs do not convert (or reuse is off), and the op writes x itself.
  std::vector<T>* kept_output(const T* x, size_t n);
  // x[0, n) kept, its store sized for n elements.
  std::vector<T>& sized_copy(const T* x, size_t n);
  // After an op wrote y[0, n) in fp32: keeps it with the copy a *_kept kernel writes in the
  // same pass (rounded from y, counted as copy writes), or keep_gemm_operand(y, n).
  void keep_as_written(const T* y, size_t n);
  // The *_kept GEMMs: run(out) computes the GEMM with out in place of c (same offsets), and
  // c[0, span) is kept with its rounding; false (nothing done) where kept_output gives no copy.
  template <typename Gemm>
  bool gemm_into_kept_copy(const T* c, size_t span, Gemm&& run);

  GemmMath math_;
  AttentionMode attention_;
  std::vector<T> operand_a_, operand_b_;
  std::vector<T> kept_result_;  // gemm_into_kept_copy's fp32 result
  // The 16-bit activation ops' widened inputs: a 16-bit tensor, and d(act) at its rounding.
  std::vector<T> half_scratch_, grad_scratch_;
  // x[0, n) in the GEMMs' 16-bit format widened into out[0, n) (exact). REQUIRES: a 16-bit mode.
  void widen_half(const uint16_t* x, size_t n, T* out) const;
  bool reuse_casts_;
  KeptOperands<T, std::vector<T>> kept_;  // kept spans, rounded (16-bit modes only)
  size_t conversions_ = 0;
  size_t copy_writes_ = 0;
};

// Loops with less work than this run on one thread: a parallel region costs a few
// microseconds of fork/join, far more when another process holds the other cores.
constexpr size_t kMinParallelWork = size_t(1) << 15;
inline bool worth_threads(size_t work) { return work >= kMinParallelWork; }

// Column blocks for reductions over rows: thread t owns columns [begin, end) and adds rows
// in order, so each sum has one fixed order whatever the thread count.
inline void column_block(int cols, int block, int* begin, int* end) {
  constexpr int kWidth = 64;
  *begin = block * kWidth;
  *end = *begin + kWidth < cols ? *begin + kWidth : cols;
}
inline int column_blocks(int cols) { return (cols + 63) / 64; }

}  // namespace lansbert::cpu
