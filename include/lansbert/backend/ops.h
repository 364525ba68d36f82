// Ops<T>: the operations the model is built from, as forward/backward pairs with the same
// argument order. The CPU backend (OpenMP + OpenBLAS) and the CUDA backend (kernels +
// cuBLAS) implement it over the shared math bodies in include/lansbert/kernels, so the
// model is written once. All matrices are row-major. Conventions (llm.c's): activation
// gradients are written (=), parameter gradients are accumulated (+=).
#pragma once

#include <cstddef>
#include <cstdint>

#include "lansbert/backend/attention.h"
#include "lansbert/core/allocator.h"
#include "lansbert/core/check.h"
#include "lansbert/core/philox.h"
#include "lansbert/kernels/activations.h"
#include "lansbert/kernels/half.h"

namespace lansbert {

enum class Trans { kNo, kYes };

// What a backend's GEMMs round their operands to before multiplying. Products of the rounded
// operands are exact in fp32 and accumulation is fp32 in every mode (the tensor-core
// contract), so a mode is defined by its operand rounding alone, and the CPU can emulate the
// GPU's bf16/fp16 GEMMs bit for bit up to summation order. Everything outside the GEMMs
// (LayerNorm, softmax, GELU, losses, the optimizer on fp32 master weights) stays fp32.
//   kFp32: no rounding.   kTf32: 10 stored mantissa bits (as fp16), CUDA tensor cores only.
//   kBf16: 7 stored mantissa bits, fp32's range (A100/H100/H200).
//   kFp16: 10 stored mantissa bits, |x| <= 65504 (V100), trained with the dynamic loss scaler.
enum class GemmMath { kFp32, kTf32, kBf16, kFp16 };

// The 16-bit format kBf16/kFp16 GEMMs take their operands in. REQUIRES: a 16-bit mode.
inline kern::HalfFormat gemm_half_format(GemmMath m) {
  return m == GemmMath::kFp16 ? kern::HalfFormat::kFp16 : kern::HalfFormat::kBf16;
}
inline bool is_half_gemm(GemmMath m) { return m == GemmMath::kBf16 || m == GemmMath::kFp16; }

inline const char* gemm_math_name(GemmMath m) {
  switch (m) {
    case GemmMath::kTf32: return "tf32";
    case GemmMath::kBf16: return "bf16";
    case GemmMath::kFp16: return "fp16";
    default: return "fp32";
  }
}

// Two-level batch of GEMMs: matrix (o, i) of A starts at a + o*a_outer + i*a_inner, and so on.
// Attention uses outer = batch, inner = heads, so heads are read in place from [B, S, H]
// activations with no transpose copies.
struct GemmBatch {
  int outer = 1, inner = 1;
  int64_t a_outer = 0, a_inner = 0;
  int64_t b_outer = 0, b_inner = 0;
  int64_t c_outer = 0, c_inner = 0;
};

// Elements from the first to one past the last that a GEMM operand op(X) [rows, cols] with
// leading dimension ld touches (in one matrix, or over a two-level batch with the given
// strides): what a backend must round or copy to hand the operand on in another format.
inline size_t gemm_operand_extent(Trans t, int rows, int cols, int ld) {
  if (rows <= 0 || cols <= 0) return 0;
  const int stored_rows = t == Trans::kNo ? rows : cols, stored_cols = t == Trans::kNo ? cols : rows;
  return size_t(stored_rows - 1) * size_t(ld) + size_t(stored_cols);
}
inline size_t gemm_operand_extent(Trans t, int rows, int cols, int ld, int outer, int64_t outer_stride,
                                  int inner, int64_t inner_stride) {
  const size_t one = gemm_operand_extent(t, rows, cols, ld);
  if (one == 0 || outer <= 0 || inner <= 0) return 0;
  return one + size_t(outer - 1) * size_t(outer_stride) + size_t(inner - 1) * size_t(inner_stride);
}

// The end of a residual block (Ops::residual_layernorm_forward): y = dropout(y + bias) +
// residual over [rows, cols], then out = LayerNorm(y; gamma, beta) with its row statistics.
template <typename T>
struct ResidualLayerNorm {
  T* y;               // in: the dense layer's output without its bias; out: the LayerNorm's input
  const T* bias;      // [cols]
  const T* residual;  // [rows, cols]
  int rows = 0, cols = 0;
  float p = 0;        // dropout probability (0: none)
  RngKey key{};       // dropout key, indexed as dropout_forward over the rows*cols elements
  const T *gamma, *beta;
  T* out;             // [rows, cols]
  T *mean, *rstd;     // [rows]
  T eps = T(1e-12);
  bool keep_out = false;  // out is a GEMM operand kept from here (layernorm_forward_kept)
  // 16-bit activations (Ops::half_activations; the defaults refuse them). residual_half: the
  // residual is used at the GEMMs' 16-bit rounding, read through its kept copy where it has one
  // (its fp32 memory may then be unwritten) and rounded in the pass otherwise (the same values).
  // out_copy_only (with keep_out, where kept_outputs_unwritten): only out's copy is written,
  // out being the copy's key. The LayerNorm outputs that only GEMMs and the next residual add
  // read (BertState::residual_copy_only) then move 2 bytes an element where they moved 4 and 4
  // (read, written), and hold no fp32 memory.
  bool residual_half = false;
  bool out_copy_only = false;
  // sum_half (16-bit activations): the dense output y and the sum are used at the 16-bit
  // rounding, so the LayerNorm normalises the rounded sum its backward reads. With
  // sum_copy_only (where kept_outputs_unwritten) y is a *_kept GEMM's output held only as its
  // 16-bit copy (Ops::gemm_kept): the pass reads y from that copy and writes the sum back into
  // it, y's fp32 memory neither read nor written (its address keys the copy, kept until the
  // backward drops it; ResidualLayerNormGrad::sum_copy_only). Without, y is rounded in the pass
  // and the rounded sum written to y in fp32: the same values. The copy saves 8 bytes per
  // element over a step: the GEMM's write and this pass's read of y, its write of the sum and
  // the backward's read, each 4 -> 2.
  bool sum_half = false;
  bool sum_copy_only = false;
};

// The backward of residual_layernorm_forward's block end (Ops::residual_layernorm_backward).
template <typename T>
struct ResidualLayerNormGrad {
  const T* dout;                     // [rows, cols]: d(out)
  const T *sum, *gamma, *mean, *rstd;  // the forward's LayerNorm input (its y), parameters and statistics
  T* dsum;                           // out [rows, cols]: d(sum), the residual's gradient
  T* dy;                             // out [rows, cols]: the dense output's gradient, dropout(d(sum)); read only by GEMMs
  T *dgamma, *dbeta, *dbias;         // [cols], accumulated
  int rows = 0, cols = 0;
  float p = 0;                       // the forward's dropout probability and key
  RngKey key{};
  bool sum_copy_only = false;        // sum is held only as its kept 16-bit copy (ResidualLayerNorm::sum_copy_only)
  // The residual gradient stream in 16 bits (16-bit activations; the defaults refuse both).
  // grad_half: d(out) is used at the GEMMs' 16-bit rounding and d(sum) is rounded where it is
  // stored, before dy and dbias are taken from it. grad_copy_only (with grad_half, where
  // kept_outputs_unwritten): d(out) is read from its kept copy and d(sum) written only into
  // dsum's kept copy (kept from here: the layer's input GEMM adds into it, gemm_accumulate_kept,
  // and the next block end down reads it as its d(out)), their fp32 memory neither read nor
  // written. Without, d(out) is rounded as read and the rounded d(sum) written in fp32: the same
  // values. Per element and block end: d(out) read and d(sum) written at 2 bytes, not 4.
  bool grad_half = false;
  bool grad_copy_only = false;
};

template <typename T>
class Ops {
 public:
  virtual ~Ops() = default;
  virtual Allocator& allocator() = 0;
  virtual void zero(T* p, size_t n) = 0;

  // The GELU every GELU op below computes (BertConfig::hidden_act): the model sets it before
  // each forward and backward, so ops shared by models of either form stay right. A wrapper
  // (ProfilingOps) passes it on to the ops it wraps.
  virtual void set_gelu_form(kern::GeluForm f) { gelu_form_ = f; }

  // C[m,n] = alpha * op(A)[m,k] * op(B)[k,n] + beta * C
  virtual void gemm(Trans ta, Trans tb, int m, int n, int k, T alpha, const T* a, int lda,
                    const T* b, int ldb, T beta, T* c, int ldc) = 0;
  virtual void gemm_batched(Trans ta, Trans tb, int m, int n, int k, T alpha, const T* a,
                            int lda, const T* b, int ldb, T beta, T* c, int ldc,
                            const GemmBatch& batch) = 0;

  // Operand reuse for GEMMs that convert their operands (GemmMath kBf16/kFp16 by a cast
  // pass). keep_gemm_operand(x, n) says that x[0, n) will not change until
  // drop_gemm_operand(x) (or until x is kept again, which says that it did change); the
  // backend may convert it once, now, and serve every GEMM operand that lies inside the span
  // from that copy, with the bits of converting at each use. Kept spans may not overlap.
  // What is kept: a backward's dY across its dX and dW GEMMs (HeldGemmOperand), the model's
  // weights and the layers' GEMM inputs from the forward to their backward (BertModel). A
  // no-op where GEMMs read T as it is, or where reuse is switched off (the backends' options).
  virtual void keep_gemm_operand(const T* x, size_t n) { (void)x, (void)n; }
  // keep_gemm_operand(x, n) where the conversion is already at hand: `converted` (this
  // backend's memory, n values in `format`) holds kern::float_to_half of x[0, n) and stays
  // unchanged while x is kept, e.g. the weight copy the optimizer writes in its update pass
  // (BertModel::weight_copy). A backend whose GEMMs take that format reads it in place and
  // converts nothing; otherwise this is keep_gemm_operand.
  virtual void keep_converted_gemm_operand(const T* x, size_t n, const uint16_t* converted,
                                           kern::HalfFormat format) {
    (void)converted, (void)format;
    keep_gemm_operand(x, n);
  }
  virtual void drop_gemm_operand(const T* x) { (void)x; }
  // Elements converted for GEMM operands since construction (0 where nothing is converted):
  // the cast traffic that 16-bit GEMMs add, for tests and profiles.
  virtual size_t gemm_operand_conversions() const { return 0; }
  // Elements of kept 16-bit copies written by the ops that produce them (the *_kept ops), 2
  // bytes each with no cast pass; counted apart from the conversions above.
  virtual size_t gemm_operand_copy_writes() const { return 0; }
  // Bytes of memory the backend holds for kept 16-bit copies now, a dropped span's included
  // (a copy stays with its address for the next micro-step), as 2-byte elements; the weights'
  // copy counts where the backend converted it itself. What BertModel::kept_copy_bytes_for
  // estimates. 0 where nothing is kept.
  virtual size_t kept_copy_bytes() const { return 0; }

  // C[m,n] = op(A)[m,k] * op(B)[k,n] + bias[n] (broadcast over the rows): a linear layer's
  // forward in one call, so a backend can fuse the bias into the GEMM's epilogue (CUDA:
  // cuBLASLt's bias epilogue) instead of a second pass over C. Operands as in gemm(); by
  // default gemm() then bias_add_forward() (the CPU's, bit for bit). REQUIRES: ldc == n.
  virtual void gemm_bias(Trans ta, Trans tb, int m, int n, int k, const T* a, int lda, const T* b, int ldb,
                         const T* bias, T* c, int ldc) {
    LB_CHECK_MSG(ldc == n, "gemm_bias: C must be contiguous rows (ldc == n)");
    gemm(ta, tb, m, n, k, T(1), a, lda, b, ldb, T(0), c, ldc);
    bias_add_forward(c, bias, m, n);
  }

  // GEMMs whose output is read only by GEMMs until it is dropped (the attention's q/k/v, ctx
  // and d(ctx) where the attention is the hand-written one): exactly gemm (alpha 1, beta 0),
  // gemm_bias or gemm_batched followed by keep_gemm_operand of C's span (its first element to
  // one past its last, gemm_operand_extent), except that where kept_outputs_unwritten() the
  // GEMM writes only that 16-bit copy (the fp32 accumulator, plus the bias in fp32, rounded
  // once: the bits of casting the fp32 result) and C is left unwritten: C's address then only
  // keys the copy. Per element that saves the 4-byte fp32 write and the cast pass's 4-byte
  // read (bert-large: 4 x N x H elements a layer forward, N x H backward). C's memory is then
  // neither read nor written: its span may be addresses only (the model's arena gives such
  // outputs none, OutputStorage), so a backend's fp32 scratch is its own.
  virtual void gemm_kept(Trans ta, Trans tb, int m, int n, int k, const T* a, int lda, const T* b, int ldb, T* c,
                         int ldc) {
    gemm(ta, tb, m, n, k, T(1), a, lda, b, ldb, T(0), c, ldc);
    keep_gemm_operand(c, gemm_operand_extent(Trans::kNo, m, n, ldc));
  }
  virtual void gemm_bias_kept(Trans ta, Trans tb, int m, int n, int k, const T* a, int lda, const T* b, int ldb,
                              const T* bias, T* c, int ldc) {
    gemm_bias(ta, tb, m, n, k, a, lda, b, ldb, bias, c, ldc);
    keep_gemm_operand(c, gemm_operand_extent(Trans::kNo, m, n, ldc));
  }
  // The 16-bit gradient stream's accumulation (ResidualLayerNormGrad::grad_copy_only): c's
  // kept copy (c[m, n], ldc == n, kept with its fp32 memory unwritten) becomes copy + op(A)
  // op(B), summed in fp32 and rounded once: the bits of gemm (beta 1) into fp32 memory holding
  // the copy's values, then rounding. A 16-bit C read and written instead of an fp32 one.
  // Where kept_outputs_unwritten() only; the default refuses.
  virtual void gemm_accumulate_kept(Trans ta, Trans tb, int m, int n, int k, const T* a, int lda, const T* b,
                                    int ldb, T* c, int ldc) {
    (void)ta, (void)tb, (void)m, (void)n, (void)k, (void)a, (void)lda, (void)b, (void)ldb, (void)c, (void)ldc;
    LB_CHECK_MSG(false, "gemm_accumulate_kept: this backend keeps no 16-bit outputs (Ops::kept_outputs_unwritten)");
  }
  // The gradient stream's ends (16-bit activations): round_to_gemm_half rounds x[0, n) in place
  // to the GEMMs' 16-bit format (where the stream is stored in fp32), widen_kept writes x[0, n)
  // from its kept copy (where it is held as that copy), so that the op after the stream reads
  // fp32 values either way. The defaults refuse (no 16-bit GEMMs).
  virtual void round_to_gemm_half(T* x, size_t n) {
    (void)x, (void)n;
    LB_CHECK_MSG(false, "round_to_gemm_half: this backend has no 16-bit GEMMs (Ops::half_activations)");
  }
  virtual void widen_kept(T* x, size_t n) {
    (void)x, (void)n;
    LB_CHECK_MSG(false, "widen_kept: this backend keeps no 16-bit copies (Ops::kept_outputs_unwritten)");
  }
  virtual void gemm_batched_kept(Trans ta, Trans tb, int m, int n, int k, const T* a, int lda, const T* b, int ldb,
                                 T* c, int ldc, const GemmBatch& batch) {
    gemm_batched(ta, tb, m, n, k, T(1), a, lda, b, ldb, T(0), c, ldc, batch);
    keep_gemm_operand(c, gemm_operand_extent(Trans::kNo, m, n, ldc, batch.outer, batch.c_outer, batch.inner,
                                             batch.c_inner));
  }
  // Whether attention_forward/backward read q, k, v, ctx and d(ctx) only through GEMMs (the
  // hand-written attention does), so that the model may produce them with the *_kept GEMMs
  // above and say so (AttentionForward::qkv_kept, ctx_kept; AttentionBackward::d_ctx_kept).
  // A fused attention reads them in fp32: CudaOps says false when it may run one.
  virtual bool attention_reads_only_gemm_operands() const { return true; }
  // Whether the model should ask attention_backward for d_q, d_k, d_v kept
  // (AttentionBackward::d_qkv_kept) with 16-bit activations: the flash attention with 16-bit
  // GEMMs, which then writes them straight into their kept 16-bit copies where
  // kept_outputs_unwritten() (no fp32 written; the projection's backward reads 2 bytes per
  // element of d(qkv) instead of 4), and in fp32 otherwise.
  virtual bool attention_keeps_input_gradients() const { return false; }
  // Whether attention_forward runs the flash attention (returns AttentionImpl::kFlash) on every
  // call whose heads are head_dim wide. Such a forward saves only one statistic per query row
  // and never touches AttentionForward::probs, probs_drop or scores, and its backward needs
  // [B, A, S] of scratch (d_probs), not [B, A, S, S]; the model then lays out no
  // probability slots at all (OutputStorage::attention_statistics_only).
  virtual bool attention_runs_flash(int head_dim) const {
    (void)head_dim;
    return false;
  }

  // y[r, c] += bias[c]                      | dbias[c] += sum_r dy[r, c]
  virtual void bias_add_forward(T* y, const T* bias, int rows, int cols) = 0;
  virtual void bias_add_backward(const T* dy, T* dbias, int rows, int cols) = 0;

  // y = a + b                               | backward of a residual: dst += src
  virtual void add_forward(const T* a, const T* b, T* y, size_t n) = 0;
  virtual void accumulate(T* dst, const T* src, size_t n) = 0;

  // Per row of x [rows, cols]; saves mean and rstd [rows] for the backward.
  virtual void layernorm_forward(const T* x, const T* gamma, const T* beta, T* y, T* mean,
                                 T* rstd, int rows, int cols, T eps) = 0;
  virtual void layernorm_backward(const T* dy, const T* x, const T* gamma, const T* mean,
                                  const T* rstd, T* dx, T* dgamma, T* dbeta, int rows,
                                  int cols) = 0;

  // Fused epilogues of a linear layer (bias added after the GEMM). Each computes exactly
  // what the unfused ops compute, in the same order (bit-identical on the CPU, built with
  // -ffp-contract=off; on CUDA nvcc may fuse a multiply and an add across the former op
  // boundary, a last-bit difference); the fusion saves passes over [rows, cols]
  // activations, which on a GPU are memory-bound.
  //   FFN:      pre += bias; act = gelu(pre)      | dpre = gelu'(pre) dact; dbias += sum_r dpre
  //   residual: y = dropout(y + bias) + residual  | dx = dropout(dy);        dbias += sum_r dx
  // (dropout keyed and indexed as dropout_forward over the rows*cols elements; dpre may
  // alias dact and dx may alias dy.)
  virtual void bias_gelu_forward(T* pre, const T* bias, T* act, int rows, int cols) = 0;
  virtual void bias_gelu_backward(const T* dact, const T* pre, T* dpre, T* dbias, int rows, int cols) = 0;
  virtual void bias_dropout_residual_forward(T* y, const T* bias, const T* residual, int rows, int cols,
                                             float p, RngKey key) = 0;
  virtual void dropout_bias_backward(const T* dy, T* dx, T* dbias, int rows, int cols, float p, RngKey key) = 0;
  // Ops whose output the caller keeps as a GEMM operand but also reads in fp32 (a LayerNorm
  // output, the dense layers' output gradients, whose bias gradients are column sums of the
  // fp32 values): exactly the op followed by keep_gemm_operand(output), except that a backend
  // that converts kept operands writes the 16-bit copy in the same pass as the fp32 output,
  // instead of a cast pass reading the output back (2 bytes written per element instead of
  // 4 read and 2 written). dx may alias dy, dpre may alias dact, as in the plain ops. Except
  // bias_gelu_backward_kept and dropout_bias_backward_kept, whose outputs only GEMMs read once
  // their bias sums are taken (in the same pass, from the fp32 values): where
  // kept_outputs_unwritten() they write only the copy (below).
  virtual void layernorm_forward_kept(const T* x, const T* gamma, const T* beta, T* y, T* mean, T* rstd, int rows,
                                      int cols, T eps) {
    layernorm_forward(x, gamma, beta, y, mean, rstd, rows, cols, eps);
    keep_gemm_operand(y, size_t(rows) * cols);
  }
  // bias_dropout_residual_forward, then layernorm_forward (layernorm_forward_kept where
  // keep_out) on its result: exactly those two ops, in that order. A backend may run them as
  // one pass that does not read the sum back from memory (CudaOps: a warp per row; 4 bytes
  // per element fewer, twice a layer). Its backward: residual_layernorm_backward.
  virtual void residual_layernorm_forward(const ResidualLayerNorm<T>& a) {
    LB_CHECK_MSG(!a.residual_half && !a.out_copy_only && !a.sum_half && !a.sum_copy_only,
                 "residual_layernorm_forward: this backend has no 16-bit activations (Ops::half_activations)");
    bias_dropout_residual_forward(a.y, a.bias, a.residual, a.rows, a.cols, a.p, a.key);
    if (a.keep_out)
      layernorm_forward_kept(a.y, a.gamma, a.beta, a.out, a.mean, a.rstd, a.rows, a.cols, a.eps);
    else
      layernorm_forward(a.y, a.gamma, a.beta, a.out, a.mean, a.rstd, a.rows, a.cols, a.eps);
  }
  // layernorm_backward, then dropout_bias_backward_kept on the d(sum) it wrote: exactly those
  // two ops. A backend may run them as one pass that does not read d(sum) back from memory
  // (CudaOps: rows up to 1024 wide with 16-bit copies kept; 4 bytes per element fewer, twice
  // a layer).
  virtual void residual_layernorm_backward(const ResidualLayerNormGrad<T>& a) {
    LB_CHECK_MSG(!a.sum_copy_only && !a.grad_half && !a.grad_copy_only,
                 "residual_layernorm_backward: this backend has no 16-bit activations (Ops::half_activations)");
    layernorm_backward(a.dout, a.sum, a.gamma, a.mean, a.rstd, a.dsum, a.dgamma, a.dbeta, a.rows, a.cols);
    dropout_bias_backward_kept(a.dsum, a.dy, a.dbias, a.rows, a.cols, a.p, a.key);
  }
  // The dense layers' output gradients (after the residual dropout): only their copy is written
  // where kept_outputs_unwritten() (4 bytes per element fewer; bert-large at 32 x 128: 4.2M
  // elements twice a layer), dx being only the copy's key (CUDA's kernel may still use it as
  // scratch where cols is not a multiple of 4).
  virtual void dropout_bias_backward_kept(const T* dy, T* dx, T* dbias, int rows, int cols, float p, RngKey key) {
    dropout_bias_backward(dy, dx, dbias, rows, cols, p, key);
    keep_gemm_operand(dx, size_t(rows) * cols);
  }
  // The FFN's pre-activation gradient: its bias gradient is summed from the fp32 values in the
  // same pass, and after it only GEMMs read it (the FFN input's dX and dW), so where the backend
  // says kept_outputs_unwritten() only its 16-bit copy is written and dpre is left as it was
  // (4 bytes per element fewer: 16.8M elements a layer for bert-large at 32 x 128).
  virtual void bias_gelu_backward_kept(const T* dact, const T* pre, T* dpre, T* dbias, int rows, int cols) {
    bias_gelu_backward(dact, pre, dpre, dbias, rows, cols);
    keep_gemm_operand(dpre, size_t(rows) * cols);
  }
  // dropout_forward, then keep_gemm_operand(y): the embeddings' output, the first layer's
  // input, is read by its GEMMs and, in fp32, by the first residual. y may be x.
  virtual void dropout_forward_kept(const T* x, T* y, size_t n, float p, RngKey key) {
    dropout_forward(x, y, n, p, key);
    keep_gemm_operand(y, n);
  }
  // dbias += column sums of dy as its GEMMs read it, where dy is kept (it came from a *_kept
  // op): at the GEMMs' 16-bit rounding where they round operands, from dy's kept copy where
  // kept_outputs_unwritten() (its fp32 values may be unwritten) and rounded in the pass
  // otherwise (the same values). The sums of a gradient stored in 16 bits
  // (AttentionBackward::d_qkv_kept). The default: fp32 GEMMs, plain sums.
  virtual void bias_add_backward_of_kept(const T* dy, T* dbias, int rows, int cols) {
    LB_CHECK_MSG(!half_activations(), "bias_add_backward_of_kept: a 16-bit backend must round the sums' inputs");
    bias_add_backward(dy, dbias, rows, cols);
  }
  // bias_add_backward, then keep_gemm_operand(dy): the column sums read every element of dy
  // anyway, so they write its 16-bit copy in the same pass (a linear layer's output gradient,
  // read next by its dX and dW GEMMs: linear_backward).
  virtual void bias_add_backward_kept(const T* dy, T* dbias, int rows, int cols) {
    bias_add_backward(dy, dbias, rows, cols);
    keep_gemm_operand(dy, size_t(rows) * cols);
  }

  // Whether the *_kept ops whose outputs only GEMMs read (the *_kept GEMMs, gelu_forward_kept,
  // bias_gelu_backward_kept, softmax_dropout_forward_kept's probs_drop, softmax_backward_kept)
  // leave their fp32 outputs unwritten (16-bit GEMMs with cast reuse).
  // Then the output pointer is only the kept span's key, and it may even be the address of
  // the op's other output or input (probs_drop = probs, act = pre): the op still writes (or reads) that tensor in
  // fp32 for the ops that read it directly, while GEMMs given that address read the kept copy
  // until it is dropped. BertModel lays its activations out so when this is true, which saves
  // the memory of the fp32 outputs (bert_model.cc).
  virtual bool kept_outputs_unwritten() const { return false; }
  // gelu_forward, then keep_gemm_operand(y): the FFN's GELU output is read only by GEMMs (the
  // output projection and its dW), so where the backend converts kept operands it is written
  // only as its 16-bit copy (as softmax_dropout_forward_kept below), and y may then be x's
  // address. The FFN's bias comes from its GEMM's epilogue (gemm_bias), so the pre-activation
  // is written once, by the GEMM, and this pass only reads it (bias_gelu_forward would read it
  // and write it back with the bias added).
  virtual void gelu_forward_kept(const T* x, T* y, size_t n) {
    gelu_forward(x, y, n);
    keep_gemm_operand(y, n);
  }

  // 16-bit FFN activations (ModelLimits::half_activations, `precision.activations: 16bit`): the
  // FFN's [N, I] pre-activation is stored only in the GEMMs' 16-bit format, in a buffer of its
  // own, and its incoming gradient d(act) is read at that rounding, as Megatron-LM and
  // NVIDIA's BERT store them. Per element over a step that is 10 bytes of traffic fewer
  // (GEMM write 4 -> 2 and two reads 4 -> 2 forward; the dX GEMM's write 4 -> 2, and the
  // backward's reads of d(act) and pre 4 -> 2 each). Only where half_activations() (bf16/fp16
  // GEMMs whose operands the backend rounds); the defaults refuse.
  virtual bool half_activations() const { return false; }
  // out[m, n] = op(A) op(B) + bias, the fp32 accumulator plus the fp32 bias rounded once to the
  // 16-bit format (gemm_bias_kept's bits). `scratch` [m, n] is T memory the backend may use
  // (CUDA's fallback where cuBLASLt has no bias epilogue) and is otherwise left alone.
  virtual void gemm_bias_half(Trans ta, Trans tb, int m, int n, int k, const T* a, int lda, const T* b, int ldb,
                              const T* bias, T* scratch, uint16_t* out) {
    (void)ta, (void)tb, (void)m, (void)n, (void)k, (void)a, (void)lda, (void)b, (void)ldb, (void)bias,
        (void)scratch, (void)out;
    LB_CHECK_MSG(false, "this backend has no 16-bit activations (Ops::half_activations)");
  }
  // gelu_forward_kept with its input in 16 bits: y = gelu(x widened), kept as a GEMM operand
  // (only its copy written where kept_outputs_unwritten()).
  virtual void gelu_forward_half_kept(const uint16_t* x, T* y, size_t n) {
    (void)x, (void)y, (void)n;
    LB_CHECK_MSG(false, "this backend has no 16-bit activations (Ops::half_activations)");
  }
  // bias_gelu_backward_kept with pre in 16 bits and dact used at its 16-bit rounding: dact is a
  // *_kept GEMM's output, read through its kept copy where kept_outputs_unwritten() and rounded
  // in the pass otherwise (the same values either way). dpre may alias dact.
  virtual void bias_gelu_backward_half_kept(const T* dact, const uint16_t* pre, T* dpre, T* dbias, int rows,
                                            int cols) {
    (void)dact, (void)pre, (void)dpre, (void)dbias, (void)rows, (void)cols;
    LB_CHECK_MSG(false, "this backend has no 16-bit activations (Ops::half_activations)");
  }
  // The FFN's first layer with 16-bit activations, as one op: pre = op(A) op(B) + bias in 16
  // bits (gemm_bias_half), act = gelu(pre) kept as a GEMM operand (gelu_forward_half_kept).
  // The default is exactly those two ops. CudaOps, for the tanh form, runs them as one GEMM
  // with cuBLASLt's GELU_AUX_BIAS epilogue (pre is its aux output, act its D), which computes
  // the GELU from the fp32 sum before rounding it: not the default's bits, within a rounding.
  virtual void gemm_bias_gelu_half(Trans ta, Trans tb, int m, int n, int k, const T* a, int lda, const T* b,
                                   int ldb, const T* bias, T* scratch, uint16_t* pre, T* act) {
    gemm_bias_half(ta, tb, m, n, k, a, lda, b, ldb, bias, scratch, pre);
    gelu_forward_half_kept(pre, act, size_t(m) * n);
  }
  // Its backward's data GEMM, as one op: dpre = gelu'(pre) * (op(A) op(B)) [m, n], kept as a
  // GEMM operand (only its copy written where kept_outputs_unwritten()), dbias += its column
  // sums. The default is exactly gemm_kept into dpre then bias_gelu_backward_half_kept in
  // place. CudaOps, for the tanh form, runs it as one GEMM with cuBLASLt's DGELU_BGRAD
  // epilogue (pre its aux input), so d(act) is never stored: within a rounding of the default.
  virtual void gemm_dgelu_bias_half(Trans ta, Trans tb, int m, int n, int k, const T* a, int lda, const T* b,
                                    int ldb, const uint16_t* pre, T* dpre, T* dbias) {
    gemm_kept(ta, tb, m, n, k, a, lda, b, ldb, dpre, n);
    bias_gelu_backward_half_kept(dpre, pre, dpre, dbias, m, n);
  }

  virtual void gelu_forward(const T* x, T* y, size_t n) = 0;
  virtual void gelu_backward(const T* dy, const T* x, T* dx, size_t n) = 0;
  virtual void tanh_forward(const T* x, T* y, size_t n) = 0;
  virtual void tanh_backward(const T* dy, const T* y, T* dx, size_t n) = 0;

  // Inverted dropout with drop probability p; the mask is redrawn from `key`, never stored.
  virtual void dropout_forward(const T* x, T* y, size_t n, float p, RngKey key) = 0;
  virtual void dropout_backward(const T* dy, T* dx, size_t n, float p, RngKey key) = 0;

  // scores/probs [B, A, S, S]; key_mask [B, S] (1 = token, 0 = padding, or packed sequence
  // numbers: kern::attention_visible). Row (b, a, i) is a softmax over the keys j that query i
  // sees of scale * scores.
  virtual void softmax_forward(const T* scores, const int32_t* key_mask, T* probs, int batch,
                               int heads, int seq, T scale) = 0;
  virtual void softmax_backward(const T* dprobs, const T* probs, T* dscores, int batch,
                                int heads, int seq, T scale) = 0;
  // Attention softmax with dropout on the probabilities, fused (the CUDA twin saves a pass
  // over the [B, A, S, S] tensor each way); the values are those of softmax_* followed or
  // preceded by dropout_* over the whole tensor with `key`, bit for bit, except the CUDA
  // backward's row dot product: its lanes sum runs of four keys (one Philox call per run),
  // softmax_backward's sum keys 32 apart, so the two orders can differ in the last bit.
  //   forward:  probs = softmax(scale * scores); probs_drop = dropout(probs)
  //   backward: dscores = softmax_backward(dropout(dprobs_drop), probs); dprobs_drop may be
  //             overwritten (the CPU drops it in place)
  virtual void softmax_dropout_forward(const T* scores, const int32_t* key_mask, T* probs, T* probs_drop,
                                       int batch, int heads, int seq, T scale, float p, RngKey key) = 0;
  virtual void dropout_softmax_backward(T* dprobs_drop, const T* probs, T* dscores, int batch, int heads,
                                        int seq, T scale, float p, RngKey key) = 0;
  // The attention's two [B, A, S, S] tensors that only GEMMs read, produced straight into
  // their kept GEMM-operand copies. Each is exactly the op above followed by
  // keep_gemm_operand of its output (probs_drop; dscores, from dropout_softmax_backward, or
  // softmax_backward when p == 0), except that where the backend converts kept operands
  // (16-bit GEMMs with cast reuse) the fp32 output is not written at all: until
  // drop_gemm_operand only GEMMs read it, and they are served from the copy, with the bits of
  // casting the fp32 values. That saves, per element, the 4-byte fp32 write and the cast
  // pass's 4-byte read (bert-large at 64 x 512: 268M elements a layer each way). dprobs may
  // be overwritten, as in dropout_softmax_backward.
  virtual void softmax_dropout_forward_kept(const T* scores, const int32_t* key_mask, T* probs, T* probs_drop,
                                            int batch, int heads, int seq, T scale, float p, RngKey key) {
    softmax_dropout_forward(scores, key_mask, probs, probs_drop, batch, heads, seq, scale, p, key);
    keep_gemm_operand(probs_drop, size_t(batch) * heads * seq * seq);
  }
  virtual void softmax_backward_kept(T* dprobs, const T* probs, T* dscores, int batch, int heads, int seq, T scale,
                                     float p, RngKey key) {
    if (p > 0)
      dropout_softmax_backward(dprobs, probs, dscores, batch, heads, seq, scale, p, key);
    else
      softmax_backward(dprobs, probs, dscores, batch, heads, seq, scale);
    keep_gemm_operand(dscores, size_t(batch) * heads * seq * seq);
  }

  // out[i, :] (+)= table[ids[i], :]          | dtable[ids[i], :] += dout[i, :] (deterministic)
  virtual void embedding_forward(const int32_t* ids, const T* table, T* out, int n, int dim,
                                 bool accumulate) = 0;
  virtual void embedding_backward(const int32_t* ids, const T* dout, T* dtable, int n, int dim) = 0;

  // dst[i, :] = src[index[i], :]            | dsrc[index[i], :] += ddst[i, :] (deterministic)
  virtual void gather_rows_forward(const T* src, const int32_t* index, T* dst, int n, int dim) = 0;
  virtual void gather_rows_backward(const T* ddst, const int32_t* index, T* dsrc, int n,
                                    int dim) = 0;

  // Per row of logits [rows, classes]: loss (0 if label < 0) and whether argmax == label.
  // Backward writes dlogits = weight * (softmax - onehot), zero rows for ignored labels.
  virtual void cross_entropy_forward(const T* logits, const int32_t* labels, T* losses,
                                     int32_t* correct, int rows, int classes) = 0;
  virtual void cross_entropy_backward(const T* logits, const int32_t* labels, T* dlogits,
                                      int rows, int classes, T weight) = 0;

  // Multi-head self-attention (attention.h). The default is the hand-written composition of
  // the ops above (attention_native.h), bit for bit what the model computed before this entry
  // point; a backend may override it with a fused kernel, returning kFused (cuDNN) or kFlash
  // (the flash attention), and falls back to the composition where its kernel does not apply.
  // The backward gets the forward's result.
  virtual AttentionImpl attention_forward(const AttentionForward<T>& args);
  virtual void attention_backward(const AttentionBackward<T>& args);

 protected:
  kern::GeluForm gelu_form_ = kern::GeluForm::kErf;
};

// Keeps x[0, n) as a GEMM operand (Ops::keep_gemm_operand) for the lifetime of the guard; with
// already_kept (x came from a *_kept op) it only drops it at the end.
template <typename T>
class HeldGemmOperand {
 public:
  HeldGemmOperand(Ops<T>& ops, const T* x, size_t n, bool already_kept = false) : ops_(ops), x_(x) {
    if (!already_kept) ops_.keep_gemm_operand(x, n);
  }
  ~HeldGemmOperand() { ops_.drop_gemm_operand(x_); }
  HeldGemmOperand(const HeldGemmOperand&) = delete;
  HeldGemmOperand& operator=(const HeldGemmOperand&) = delete;

 private:
  Ops<T>& ops_;
  const T* x_;
};

}  // namespace lansbert

#include "lansbert/backend/attention_native.h"  // the default attention (needs Ops<T> complete)
