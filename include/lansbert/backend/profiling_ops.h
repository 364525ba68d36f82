// ProfilingOps<T>: an Ops<T> that forwards every call to another backend and adds up, per
// operation, the wall time and what the call moves: FLOPs (GEMMs only, 2 per multiply-add, as
// the MFU count of model/flops.h) and bytes of device memory, for `lansbert bench --profile`
// and its roofline floor (bench_profile.h). A `sync` callback (the CUDA backend's device
// synchronise) is called before and after each op so that asynchronous launches are charged
// to the op that issued them; profiling therefore slows a GPU run and is never on in training.
//
// Bytes are a traffic model, not a measurement: each tensor an op's interface reads or writes
// is counted once at its stored width (T for activations; the GEMM operand width given to the
// constructor for what GEMMs read: 2 where a backend converts operands to bf16/fp16, else
// sizeof(T)), plus the backend's own conversion traffic read from its counters around the call
// (Ops::gemm_operand_conversions: 4 bytes read and 2 written each; gemm_operand_copy_writes: 2
// bytes each). Where the backend leaves a *_kept op's fp32 output unwritten
// (Ops::kept_outputs_unwritten) that output costs only its 16-bit copy. Caches are ignored:
// a tensor read twice in one op (the embedding backward's rows) counts twice, and the fused
// attention's staging is counted as cuda/fused_attention.cu does it (attention_forward below),
// so the figure is what kernels that stream their operands once must move.
#pragma once

#include <chrono>
#include <functional>
#include <map>
#include <string>
#include <utility>

#include "lansbert/backend/ops.h"
#include "lansbert/backend/roofline.h"

namespace lansbert {

template <typename T>
class ProfilingOps : public Ops<T> {
 public:
  struct Entry {
    double seconds = 0;
    long calls = 0;
    double flops = 0;  // GEMM FLOPs
    double bytes = 0;  // modelled memory traffic (above)
    // With set_roofline: the calls' floors summed (each call's, not the row's: a row mixes
    // FLOP-bound and memory-bound calls), and the part of it from FLOP-bound calls.
    double floor_seconds = 0;
    double floor_compute_seconds = 0;
  };

  // gemm_operand_bytes: what a GEMM operand element costs to read (0: sizeof(T)).
  ProfilingOps(Ops<T>& inner, std::function<void()> sync = nullptr, int gemm_operand_bytes = 0)
      : inner_(inner), sync_(std::move(sync)), G_(gemm_operand_bytes > 0 ? gemm_operand_bytes : int(sizeof(T))) {}
  const std::map<std::string, Entry>& entries() const { return entries_; }
  void reset() { entries_.clear(); }
  // Run the hand-written attention (attention_native.h) through this profiler, so that its
  // GEMMs and softmax are rows of their own, instead of timing the entry point as one op.
  // Only where the inner backend's attention is that composition (the CPU, CUDA's `native`):
  // the calls are then the same, in the same order, as the inner backend would make.
  void expand_native_attention(bool on) { expand_attention_ = on; }
  // Also add up each call's roofline floor on this device (Entry::floor_seconds).
  void set_roofline(const Roofline& r) { roofline_ = r; }

  Allocator& allocator() override { return inner_.allocator(); }
  void set_gelu_form(kern::GeluForm f) override {
    Ops<T>::set_gelu_form(f);
    inner_.set_gelu_form(f);
  }
  void zero(T* p, size_t n) override { time("zero", 0, E * n, [&] { inner_.zero(p, n); }); }
  void gemm(Trans ta, Trans tb, int m, int n, int k, T alpha, const T* a, int lda, const T* b, int ldb, T beta,
            T* c, int ldc) override {
    time("gemm", gemm_flops(m, n, k), gemm_bytes(m, n, k, beta != T(0) ? 2 * E : E),
         [&] { inner_.gemm(ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc); });
  }
  void gemm_batched(Trans ta, Trans tb, int m, int n, int k, T alpha, const T* a, int lda, const T* b, int ldb,
                    T beta, T* c, int ldc, const GemmBatch& g) override {
    const double count = double(g.outer) * g.inner;
    time("gemm_batched", count * gemm_flops(m, n, k), count * gemm_bytes(m, n, k, beta != T(0) ? 2 * E : E),
         [&] { inner_.gemm_batched(ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc, g); });
  }
  // The bias is charged as fused into the GEMM's epilogue (CUDA's fallback, where cuBLASLt has
  // no epilogue for the operands, adds a pass over C that is not counted).
  void gemm_bias(Trans ta, Trans tb, int m, int n, int k, const T* a, int lda, const T* b, int ldb, const T* bias,
                 T* c, int ldc) override {
    time("gemm_bias", gemm_flops(m, n, k), gemm_bytes(m, n, k, E) + E * n,
         [&] { inner_.gemm_bias(ta, tb, m, n, k, a, lda, b, ldb, bias, c, ldc); });
  }
  // Charged to the plain GEMMs' rows: the same GEMMs, with only the output's format changed.
  void gemm_kept(Trans ta, Trans tb, int m, int n, int k, const T* a, int lda, const T* b, int ldb, T* c,
                 int ldc) override {
    time("gemm", gemm_flops(m, n, k), gemm_bytes(m, n, k, kept_out()),
         [&] { inner_.gemm_kept(ta, tb, m, n, k, a, lda, b, ldb, c, ldc); });
  }
  // C's copy read and written at 2 bytes each (beta 1 into a 16-bit C).
  void gemm_accumulate_kept(Trans ta, Trans tb, int m, int n, int k, const T* a, int lda, const T* b, int ldb, T* c,
                            int ldc) override {
    time("gemm", gemm_flops(m, n, k), gemm_bytes(m, n, k, 4),
         [&] { inner_.gemm_accumulate_kept(ta, tb, m, n, k, a, lda, b, ldb, c, ldc); });
  }
  void gemm_bias_kept(Trans ta, Trans tb, int m, int n, int k, const T* a, int lda, const T* b, int ldb,
                      const T* bias, T* c, int ldc) override {
    time("gemm_bias", gemm_flops(m, n, k), gemm_bytes(m, n, k, kept_out()) + E * n,
         [&] { inner_.gemm_bias_kept(ta, tb, m, n, k, a, lda, b, ldb, bias, c, ldc); });
  }
  void gemm_batched_kept(Trans ta, Trans tb, int m, int n, int k, const T* a, int lda, const T* b, int ldb, T* c,
                         int ldc, const GemmBatch& g) override {
    const double count = double(g.outer) * g.inner;
    time("gemm_batched", count * gemm_flops(m, n, k), count * gemm_bytes(m, n, k, kept_out()),
         [&] { inner_.gemm_batched_kept(ta, tb, m, n, k, a, lda, b, ldb, c, ldc, g); });
  }
  bool attention_reads_only_gemm_operands() const override { return inner_.attention_reads_only_gemm_operands(); }
  // 16-bit FFN activations: the same rows as the fp32-stored ops they replace, the 16-bit
  // tensors at 2 bytes (d(act) at 2 where read from its copy, else E and rounded in the pass).
  bool half_activations() const override { return inner_.half_activations(); }
  bool attention_keeps_input_gradients() const override { return inner_.attention_keeps_input_gradients(); }
  bool attention_runs_flash(int head_dim) const override {
    return !expand_attention_ && inner_.attention_runs_flash(head_dim);
  }
  // d(q, k, v)'s bias sums from its copy: 2 bytes an element read where fp32 is unwritten.
  void bias_add_backward_of_kept(const T* dy, T* db, int r, int c) override {
    time("bias_add_backward", 0, kept_bias_sum_bytes(r, c), [&] { inner_.bias_add_backward_of_kept(dy, db, r, c); });
  }
  void gemm_bias_half(Trans ta, Trans tb, int m, int n, int k, const T* a, int lda, const T* b, int ldb,
                      const T* bias, T* scratch, uint16_t* out) override {
    time("gemm_bias", gemm_flops(m, n, k), gemm_bytes(m, n, k, 2) + E * n,
         [&] { inner_.gemm_bias_half(ta, tb, m, n, k, a, lda, b, ldb, bias, scratch, out); });
  }
  void gelu_forward_half_kept(const uint16_t* x, T* y, size_t n) override {
    time("gelu_forward", 0, (2 + kept_out()) * double(n), [&] { inner_.gelu_forward_half_kept(x, y, n); });
  }
  void bias_gelu_backward_half_kept(const T* dact, const uint16_t* pre, T* dpre, T* db, int r, int c) override {
    const double dact_bytes = inner_.kept_outputs_unwritten() ? 2 : E;
    time("bias_gelu_backward", 0, (dact_bytes + 2 + kept_out()) * r * c + 2.0 * E * c,
         [&] { inner_.bias_gelu_backward_half_kept(dact, pre, dpre, db, r, c); });
  }
  // The FFN's GEMMs with the GELU in their epilogues: for the tanh form, charged as CUDA runs
  // them (one GEMM each: the forward writes pre and act's copy, 2 bytes each; the backward
  // reads pre as its aux input and writes d(pre)'s copy and the bias gradient, then adds that
  // into dbias); for the erf form, the two ops each is made of, on their own rows.
  void gemm_bias_gelu_half(Trans ta, Trans tb, int m, int n, int k, const T* a, int lda, const T* b, int ldb,
                           const T* bias, T* scratch, uint16_t* pre, T* act) override {
    if (this->gelu_form_ != kern::GeluForm::kTanh)
      return Ops<T>::gemm_bias_gelu_half(ta, tb, m, n, k, a, lda, b, ldb, bias, scratch, pre, act);
    time("gemm_bias_gelu", gemm_flops(m, n, k), gemm_bytes(m, n, k, 2 + kept_out()) + E * n,
         [&] { inner_.gemm_bias_gelu_half(ta, tb, m, n, k, a, lda, b, ldb, bias, scratch, pre, act); });
  }
  void gemm_dgelu_bias_half(Trans ta, Trans tb, int m, int n, int k, const T* a, int lda, const T* b, int ldb,
                            const uint16_t* pre, T* dpre, T* db) override {
    if (this->gelu_form_ != kern::GeluForm::kTanh)
      return Ops<T>::gemm_dgelu_bias_half(ta, tb, m, n, k, a, lda, b, ldb, pre, dpre, db);
    time("gemm_dgelu_bias", gemm_flops(m, n, k), gemm_bytes(m, n, k, 2 + kept_out()) + 4.0 * E * n,
         [&] { inner_.gemm_dgelu_bias_half(ta, tb, m, n, k, a, lda, b, ldb, pre, dpre, db); });
  }
  void keep_gemm_operand(const T* x, size_t n) override {
    time("keep_gemm_operand", 0, 0, [&] { inner_.keep_gemm_operand(x, n); });
  }
  void keep_converted_gemm_operand(const T* x, size_t n, const uint16_t* converted,
                                   kern::HalfFormat format) override {
    time("keep_gemm_operand", 0, 0, [&] { inner_.keep_converted_gemm_operand(x, n, converted, format); });
  }
  void drop_gemm_operand(const T* x) override { inner_.drop_gemm_operand(x); }
  size_t gemm_operand_conversions() const override { return inner_.gemm_operand_conversions(); }
  size_t gemm_operand_copy_writes() const override { return inner_.gemm_operand_copy_writes(); }
  size_t kept_copy_bytes() const override { return inner_.kept_copy_bytes(); }
  void layernorm_forward_kept(const T* x, const T* g, const T* b, T* y, T* mean, T* rstd, int r, int c,
                              T eps) override {
    time("layernorm_forward", 0, layernorm_forward_bytes(r, c),
         [&] { inner_.layernorm_forward_kept(x, g, b, y, mean, rstd, r, c, eps); });
  }
  // y and the residual read, y and out written per element (out's kept copy through the
  // backend's counters); the bias, gamma and beta read per column, mean and rstd written per
  // row: the two ops' bytes less the LayerNorm's read of the sum. A 16-bit residual is read at
  // 2 bytes, and out written only as its copy costs nothing here; 16-bit sums (y read from its
  // copy, the sum written back into it) 2 bytes each.
  void residual_layernorm_forward(const ResidualLayerNorm<T>& a) override {
    const bool unwritten = inner_.kept_outputs_unwritten();
    const double residual = a.residual_half && unwritten ? 2 : E, out = a.out_copy_only ? 0 : E;
    const double y_and_sum = a.sum_copy_only && unwritten ? 4 : 2 * E;
    time("residual_layernorm_forward", 0,
         (y_and_sum + residual + out) * a.rows * a.cols + E * (3.0 * a.cols + 2.0 * a.rows),
         [&] { inner_.residual_layernorm_forward(a); });
  }
  // layernorm_backward's bytes (the sum read at 2 bytes from its copy where 16-bit), then the
  // dropout-bias backward's less its read of d(sum). With the gradient stream in copies d(out)
  // is read at 2 bytes and d(sum) written only as its copy (the backend counts that write).
  void residual_layernorm_backward(const ResidualLayerNormGrad<T>& a) override {
    const bool unwritten = inner_.kept_outputs_unwritten();
    const double r = a.rows, c = a.cols, sum = a.sum_copy_only && unwritten ? 2 : E;
    const double grads = a.grad_copy_only && unwritten ? 2 : 2 * E;  // d(out) read, d(sum) written
    time("residual_layernorm_backward", 0,
         (grads + sum + kept_out()) * r * c + E * (2.0 * r + 5.0 * c) + 2.0 * E * c,
         [&] { inner_.residual_layernorm_backward(a); });
  }
  // The gradient stream's ends (ops.h): a pass over fp32 memory, or from the copy into it.
  void round_to_gemm_half(T* x, size_t n) override {
    time("gradient_stream_ends", 0, 2.0 * E * n, [&] { inner_.round_to_gemm_half(x, n); });
  }
  void widen_kept(T* x, size_t n) override {
    time("gradient_stream_ends", 0, (2.0 + E) * n, [&] { inner_.widen_kept(x, n); });
  }
  void dropout_bias_backward_kept(const T* dy, T* dx, T* db, int r, int c, float p, RngKey k) override {
    time("dropout_bias_backward", 0, (E + kept_out()) * r * c + 2.0 * E * c,
         [&] { inner_.dropout_bias_backward_kept(dy, dx, db, r, c, p, k); });
  }
  void bias_gelu_backward_kept(const T* dact, const T* pre, T* dpre, T* db, int r, int c) override {
    time("bias_gelu_backward", 0, (2.0 * E + kept_out()) * r * c + 2.0 * E * c,
         [&] { inner_.bias_gelu_backward_kept(dact, pre, dpre, db, r, c); });
  }
  void bias_add_forward(T* y, const T* b, int r, int c) override {
    time("bias_add_forward", 0, E * (2.0 * r * c + c), [&] { inner_.bias_add_forward(y, b, r, c); });
  }
  void bias_add_backward(const T* dy, T* db, int r, int c) override {
    time("bias_add_backward", 0, E * (double(r) * c + 2.0 * c), [&] { inner_.bias_add_backward(dy, db, r, c); });
  }
  void dropout_forward_kept(const T* x, T* y, size_t n, float p, RngKey k) override {
    time("dropout_forward", 0, 2.0 * E * n, [&] { inner_.dropout_forward_kept(x, y, n, p, k); });
  }
  void bias_add_backward_kept(const T* dy, T* db, int r, int c) override {
    time("bias_add_backward", 0, E * (double(r) * c + 2.0 * c),
         [&] { inner_.bias_add_backward_kept(dy, db, r, c); });
  }
  void add_forward(const T* a, const T* b, T* y, size_t n) override {
    time("add_forward", 0, 3.0 * E * n, [&] { inner_.add_forward(a, b, y, n); });
  }
  void accumulate(T* d, const T* s, size_t n) override {
    time("accumulate", 0, 3.0 * E * n, [&] { inner_.accumulate(d, s, n); });
  }
  void layernorm_forward(const T* x, const T* g, const T* b, T* y, T* mean, T* rstd, int r, int c, T eps) override {
    time("layernorm_forward", 0, layernorm_forward_bytes(r, c),
         [&] { inner_.layernorm_forward(x, g, b, y, mean, rstd, r, c, eps); });
  }
  // dy, x read and dx written per element; mean/rstd per row; gamma read, dgamma/dbeta updated.
  void layernorm_backward(const T* dy, const T* x, const T* g, const T* mean, const T* rstd, T* dx, T* dg, T* db,
                          int r, int c) override {
    time("layernorm_backward", 0, E * (3.0 * r * c + 2.0 * r + 5.0 * c),
         [&] { inner_.layernorm_backward(dy, x, g, mean, rstd, dx, dg, db, r, c); });
  }
  // pre is read and written back with the bias added; act written.
  void bias_gelu_forward(T* pre, const T* b, T* act, int r, int c) override {
    time("bias_gelu_forward", 0, E * (3.0 * r * c + c), [&] { inner_.bias_gelu_forward(pre, b, act, r, c); });
  }
  bool kept_outputs_unwritten() const override { return inner_.kept_outputs_unwritten(); }
  void gelu_forward_kept(const T* x, T* y, size_t n) override {
    time("gelu_forward", 0, (E + kept_out()) * n, [&] { inner_.gelu_forward_kept(x, y, n); });
  }
  void bias_gelu_backward(const T* dact, const T* pre, T* dpre, T* db, int r, int c) override {
    time("bias_gelu_backward", 0, E * (3.0 * r * c + 2.0 * c),
         [&] { inner_.bias_gelu_backward(dact, pre, dpre, db, r, c); });
  }
  void bias_dropout_residual_forward(T* y, const T* b, const T* res, int r, int c, float p, RngKey k) override {
    time("bias_dropout_residual_forward", 0, E * (3.0 * r * c + c),
         [&] { inner_.bias_dropout_residual_forward(y, b, res, r, c, p, k); });
  }
  void dropout_bias_backward(const T* dy, T* dx, T* db, int r, int c, float p, RngKey k) override {
    time("dropout_bias_backward", 0, E * (2.0 * r * c + 2.0 * c),
         [&] { inner_.dropout_bias_backward(dy, dx, db, r, c, p, k); });
  }
  void gelu_forward(const T* x, T* y, size_t n) override {
    time("gelu_forward", 0, 2.0 * E * n, [&] { inner_.gelu_forward(x, y, n); });
  }
  void gelu_backward(const T* dy, const T* x, T* dx, size_t n) override {
    time("gelu_backward", 0, 3.0 * E * n, [&] { inner_.gelu_backward(dy, x, dx, n); });
  }
  void tanh_forward(const T* x, T* y, size_t n) override {
    time("tanh_forward", 0, 2.0 * E * n, [&] { inner_.tanh_forward(x, y, n); });
  }
  void tanh_backward(const T* dy, const T* y, T* dx, size_t n) override {
    time("tanh_backward", 0, 3.0 * E * n, [&] { inner_.tanh_backward(dy, y, dx, n); });
  }
  void dropout_forward(const T* x, T* y, size_t n, float p, RngKey k) override {
    time("dropout_forward", 0, 2.0 * E * n, [&] { inner_.dropout_forward(x, y, n, p, k); });
  }
  void dropout_backward(const T* dy, T* dx, size_t n, float p, RngKey k) override {
    time("dropout_backward", 0, 2.0 * E * n, [&] { inner_.dropout_backward(dy, dx, n, p, k); });
  }
  // The softmaxes: [B, A, S, S] tensors, plus the key mask (one int32 per key) per sequence.
  void softmax_forward(const T* s, const int32_t* m, T* p, int b, int h, int sq, T sc) override {
    time("softmax_forward", 0, 2.0 * E * scores(b, h, sq) + 4.0 * b * sq,
         [&] { inner_.softmax_forward(s, m, p, b, h, sq, sc); });
  }
  void softmax_backward(const T* dp, const T* p, T* ds, int b, int h, int sq, T sc) override {
    time("softmax_backward", 0, 3.0 * E * scores(b, h, sq), [&] { inner_.softmax_backward(dp, p, ds, b, h, sq, sc); });
  }
  void softmax_dropout_forward(const T* s, const int32_t* m, T* p, T* pd, int b, int h, int sq, T sc, float dp,
                               RngKey k) override {
    time("softmax_dropout_forward", 0, 3.0 * E * scores(b, h, sq) + 4.0 * b * sq,
         [&] { inner_.softmax_dropout_forward(s, m, p, pd, b, h, sq, sc, dp, k); });
  }
  void dropout_softmax_backward(T* dpd, const T* p, T* ds, int b, int h, int sq, T sc, float dp,
                                RngKey k) override {
    time("dropout_softmax_backward", 0, 3.0 * E * scores(b, h, sq),
         [&] { inner_.dropout_softmax_backward(dpd, p, ds, b, h, sq, sc, dp, k); });
  }
  void softmax_dropout_forward_kept(const T* s, const int32_t* m, T* p, T* pd, int b, int h, int sq, T sc, float dp,
                                    RngKey k) override {
    time("softmax_dropout_forward", 0, (2.0 * E + kept_out()) * scores(b, h, sq) + 4.0 * b * sq,
         [&] { inner_.softmax_dropout_forward_kept(s, m, p, pd, b, h, sq, sc, dp, k); });
  }
  void softmax_backward_kept(T* dpd, const T* p, T* ds, int b, int h, int sq, T sc, float dp, RngKey k) override {
    time(dp > 0 ? "dropout_softmax_backward" : "softmax_backward", 0, (2.0 * E + kept_out()) * scores(b, h, sq),
         [&] { inner_.softmax_backward_kept(dpd, p, ds, b, h, sq, sc, dp, k); });
  }
  // Rows of the table read (and out read too when accumulating), ids read.
  void embedding_forward(const int32_t* ids, const T* t, T* o, int n, int d, bool acc) override {
    time("embedding_forward", 0, E * double(n) * d * (acc ? 3 : 2) + 4.0 * n,
         [&] { inner_.embedding_forward(ids, t, o, n, d, acc); });
  }
  // dout read, and a table row read and written per id (at most: repeated ids share a row).
  void embedding_backward(const int32_t* ids, const T* dout, T* dt, int n, int d) override {
    time("embedding_backward", 0, 3.0 * E * n * d + 4.0 * n, [&] { inner_.embedding_backward(ids, dout, dt, n, d); });
  }
  void gather_rows_forward(const T* s, const int32_t* idx, T* d, int n, int dim) override {
    time("gather_rows_forward", 0, 2.0 * E * n * dim + 4.0 * n, [&] { inner_.gather_rows_forward(s, idx, d, n, dim); });
  }
  void gather_rows_backward(const T* dd, const int32_t* idx, T* ds, int n, int dim) override {
    time("gather_rows_backward", 0, 3.0 * E * n * dim + 4.0 * n,
         [&] { inner_.gather_rows_backward(dd, idx, ds, n, dim); });
  }
  void cross_entropy_forward(const T* l, const int32_t* lab, T* loss, int32_t* c, int r, int k) override {
    time("cross_entropy_forward", 0, E * double(r) * k + 12.0 * r,
         [&] { inner_.cross_entropy_forward(l, lab, loss, c, r, k); });
  }
  void cross_entropy_backward(const T* l, const int32_t* lab, T* dl, int r, int k, T w) override {
    time("cross_entropy_backward", 0, 2.0 * E * r * k + 4.0 * r,
         [&] { inner_.cross_entropy_backward(l, lab, dl, r, k, w); });
  }
  // The entry point, timed whole unless expand_native_attention: a fused attention is what
  // gets timed (the hand-written one's GEMMs and softmax are then charged to these rows). Its
  // traffic is that of the CUDA backend's cuDNN path (cuda/fused_attention.cu), per element of
  // the [B*S, H] tensors: the forward reads q, k, v in fp32 and writes their bf16 staging
  // (4 + 2), cuDNN reads it (2) and writes O in bf16 (2), which is widened into ctx (2 + 4):
  // 32 bytes. The backward stages q, k, v, ctx and d(ctx) the same way (5 x 8), clears dq, dk, dv
  // (3 x 2), cuDNN writes them (3 x 2) and accumulates dQ in fp32 (clear, read, write: 12),
  // and they are widened into the model's fp32 gradients (3 x 6): 82 bytes. Per row of scores
  // one fp32 statistic (forward write; backward read, and a row sum written); with dropout the
  // 16-bit keep mask of [B, A, S, S], written and read in each direction. FLOPs: the two GEMMs
  // forward, five backward (cuDNN recomputes the scores); a layer that fell back to the
  // hand-written attention is charged the same (four GEMMs backward).
  //
  // The flash attention (kernels/flash_attention.h) has rows of its own. Forward: q, k, v read
  // and ctx written (4 E per element in fp32; where they are kept 16-bit copies, 2 bytes each
  // read and ctx's copy counted by the backend as a copy write), the key mask, one statistic
  // per row. Backward, three kernels: D = d(ctx) . ctx (reads both, writes D per row); dK/dV
  // (reads q, k, v, d(ctx), the mask and lse, D per row; writes d_k, d_v); dQ (reads the same,
  // writes d_q): ten input reads and three fp32 writes per element (13 E in fp32, 20 + 3 E
  // from copies; 20 with d(q, k, v) written as copies, AttentionBackward::d_qkv_kept, whose
  // 2-byte writes the backend counts). Its dropout mask is drawn in the kernels, never stored.
  // FLOPs: two GEMMs forward, seven backward (the scores and d(pd) are computed by both
  // backward kernels). K and V tiles re-read by other query tiles are assumed to hit cache.
  // With AttentionBackward::d_qkv_bias the kernels also sum what they write into per-tile
  // partials (4 bytes each, written and read back once) and add those to the bias; where
  // d(q, k, v) is not written as copies, a bias_add_backward_of_kept pass inside the backend
  // reads it again (charged here, to the same row).
  AttentionImpl attention_forward(const AttentionForward<T>& a) override {
    if (expand_attention_) return native_attention_forward(*this, a);
    const AttentionShape& s = a.shape;
    AttentionImpl impl = AttentionImpl::kNative;
    time_costed([&] { impl = inner_.attention_forward(a); }, [&] {
      if (impl == AttentionImpl::kFlash) {
        const double in = a.qkv_kept ? 2 : E, out = a.ctx_kept ? 0 : E;
        return Cost{"flash_attention_forward", 2 * attention_gemm_flops(s),
                    (3 * in + out) * tokens(s) * s.ld + 4.0 * tokens(s) + 4.0 * rows(s)};
      }
      return Cost{"attention_forward", 2 * attention_gemm_flops(s),
                  32.0 * tokens(s) * s.ld + 4.0 * rows(s) + mask_bytes(s, a.dropout)};
    });
    return impl;
  }
  void attention_backward(const AttentionBackward<T>& a) override {
    if (expand_attention_) return native_attention_backward(*this, a);
    const AttentionShape& s = a.shape;
    if (a.impl == AttentionImpl::kFlash) {
      // d_q, d_k, d_v written into their kept copies (d_qkv_kept, from copies): counted by the
      // backend as copy writes.
      const bool copies = a.d_qkv_kept && a.d_ctx_kept;
      const double in = a.d_ctx_kept ? 2 : E, out = copies ? 0 : 3 * E;
      double bias = 0;
      if (a.d_qkv_bias) {
        const double cols = 3.0 * s.ld, tiles = (s.seq + kern::kFlashRowTile - 1) / kern::kFlashRowTile;
        bias = copies ? 8.0 * s.batch * tiles * cols + 2.0 * E * cols : kept_bias_sum_bytes(tokens(s), cols);
      }
      time("flash_attention_backward", 7 * attention_gemm_flops(s),
           (10 * in + out) * tokens(s) * s.ld + 8.0 * tokens(s) + 20.0 * rows(s) + bias, [&] { inner_.attention_backward(a); });
      return;
    }
    // (d_qkv_bias: the backend's bias_add_backward_of_kept pass, as in the flash row.)
    const double bias = a.d_qkv_bias ? kept_bias_sum_bytes(tokens(s), 3.0 * s.ld) : 0;
    const double bytes = 82.0 * tokens(s) * s.ld + 8.0 * rows(s) + mask_bytes(s, a.dropout) + bias;
    const int gemms = a.impl == AttentionImpl::kFused ? 5 : 4;
    time("attention_backward", gemms * attention_gemm_flops(s), bytes, [&] { inner_.attention_backward(a); });
  }

 private:
  static constexpr double E = sizeof(T);  // an activation element
  static double gemm_flops(int m, int n, int k) { return 2.0 * m * n * k; }
  // A and B at the GEMM operand width, C at c_bytes per element (read and written with beta).
  double gemm_bytes(int m, int n, int k, double c_bytes) const {
    return G_ * (double(m) * k + double(k) * n) + c_bytes * m * n;
  }
  // What a *_kept op's output costs besides its 16-bit copy (counted by the backend).
  double kept_out() const { return inner_.kept_outputs_unwritten() ? 0 : E; }
  static double layernorm_forward_bytes(int r, int c) { return E * (2.0 * r * c + 2.0 * r + 2.0 * c); }
  static double scores(int b, int h, int s) { return double(b) * h * s * s; }
  static double tokens(const AttentionShape& s) { return double(s.batch) * s.seq; }
  // bias_add_backward_of_kept's bytes: dy read (2 bytes from its copy where fp32 is unwritten),
  // the bias read and written.
  double kept_bias_sum_bytes(double rows, double cols) const {
    return (inner_.kept_outputs_unwritten() ? 2 : E) * rows * cols + 2.0 * E * cols;
  }
  static double rows(const AttentionShape& s) { return double(s.batch) * s.heads * s.seq; }
  static double attention_gemm_flops(const AttentionShape& s) { return 2.0 * rows(s) * s.seq * s.head_dim; }
  static double mask_bytes(const AttentionShape& s, float dropout) {
    return dropout > 0 ? 2.0 * 2.0 * scores(s.batch, s.heads, s.seq) : 0;
  }

  struct Cost {
    const char* name;
    double flops, bytes;
  };
  template <typename F>
  void time(const char* name, double flops, double bytes, F&& f) {
    time_costed(std::forward<F>(f), [&] { return Cost{name, flops, bytes}; });
  }
  // time() for a call whose row and cost are known only once it ran (cost() after f()).
  template <typename F, typename C>
  void time_costed(F&& f, C&& cost) {
    if (sync_) sync_();
    const size_t conversions = inner_.gemm_operand_conversions(), copies = inner_.gemm_operand_copy_writes();
    const auto t0 = std::chrono::steady_clock::now();
    f();
    if (sync_) sync_();
    const Cost c = cost();
    double flops = c.flops, bytes = c.bytes;
    Entry& e = entries_[c.name];
    e.seconds += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    ++e.calls;
    bytes += 6.0 * double(inner_.gemm_operand_conversions() - conversions) +
             2.0 * double(inner_.gemm_operand_copy_writes() - copies);
    e.flops += flops;
    e.bytes += bytes;
    const double floor = roofline_.floor_seconds(flops, bytes);
    e.floor_seconds += floor;
    if (roofline_.compute_bound(flops, bytes)) e.floor_compute_seconds += floor;
  }

  Ops<T>& inner_;
  std::function<void()> sync_;
  int G_;  // bytes per GEMM operand element
  bool expand_attention_ = false;
  Roofline roofline_;  // zero peaks: no floors
  std::map<std::string, Entry> entries_;
};

}  // namespace lansbert
