// ProfilingOps<T>: an Ops<T> that forwards every call to another backend and adds up the
// wall time per operation, for `lansbert bench --profile`. A `sync` callback (the CUDA
// backend's device synchronise) is called before and after each op so that asynchronous
// launches are charged to the op that issued them; profiling therefore slows a GPU run and
// is never on in training.
#pragma once

#include <chrono>
#include <functional>
#include <map>
#include <string>

#include "lansbert/backend/ops.h"

namespace lansbert {

template <typename T>
class ProfilingOps : public Ops<T> {
 public:
  struct Entry {
    double seconds = 0;
    long calls = 0;
  };

  ProfilingOps(Ops<T>& inner, std::function<void()> sync = nullptr) : inner_(inner), sync_(std::move(sync)) {}
  const std::map<std::string, Entry>& entries() const { return entries_; }
  void reset() { entries_.clear(); }

  Allocator& allocator() override { return inner_.allocator(); }
  void zero(T* p, size_t n) override { time("zero", [&] { inner_.zero(p, n); }); }
  void gemm(Trans ta, Trans tb, int m, int n, int k, T alpha, const T* a, int lda, const T* b, int ldb, T beta,
            T* c, int ldc) override {
    time("gemm", [&] { inner_.gemm(ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc); });
  }
  void gemm_batched(Trans ta, Trans tb, int m, int n, int k, T alpha, const T* a, int lda, const T* b, int ldb,
                    T beta, T* c, int ldc, const GemmBatch& g) override {
    time("gemm_batched", [&] { inner_.gemm_batched(ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc, g); });
  }
  void gemm_bias(Trans ta, Trans tb, int m, int n, int k, const T* a, int lda, const T* b, int ldb, const T* bias,
                 T* c, int ldc) override {
    time("gemm_bias", [&] { inner_.gemm_bias(ta, tb, m, n, k, a, lda, b, ldb, bias, c, ldc); });
  }
  // Charged to the plain GEMMs' rows: the same GEMMs, with only the output's format changed.
  void gemm_kept(Trans ta, Trans tb, int m, int n, int k, const T* a, int lda, const T* b, int ldb, T* c,
                 int ldc) override {
    time("gemm", [&] { inner_.gemm_kept(ta, tb, m, n, k, a, lda, b, ldb, c, ldc); });
  }
  void gemm_bias_kept(Trans ta, Trans tb, int m, int n, int k, const T* a, int lda, const T* b, int ldb,
                      const T* bias, T* c, int ldc) override {
    time("gemm_bias", [&] { inner_.gemm_bias_kept(ta, tb, m, n, k, a, lda, b, ldb, bias, c, ldc); });
  }
  void gemm_batched_kept(Trans ta, Trans tb, int m, int n, int k, const T* a, int lda, const T* b, int ldb, T* c,
                         int ldc, const GemmBatch& g) override {
    time("gemm_batched", [&] { inner_.gemm_batched_kept(ta, tb, m, n, k, a, lda, b, ldb, c, ldc, g); });
  }
  bool attention_reads_only_gemm_operands() const override { return inner_.attention_reads_only_gemm_operands(); }
  void keep_gemm_operand(const T* x, size_t n) override {
    time("keep_gemm_operand", [&] { inner_.keep_gemm_operand(x, n); });
  }
  void keep_converted_gemm_operand(const T* x, size_t n, const uint16_t* converted,
                                   kern::HalfFormat format) override {
    time("keep_gemm_operand", [&] { inner_.keep_converted_gemm_operand(x, n, converted, format); });
  }
  void drop_gemm_operand(const T* x) override { inner_.drop_gemm_operand(x); }
  size_t gemm_operand_conversions() const override { return inner_.gemm_operand_conversions(); }
  size_t gemm_operand_copy_writes() const override { return inner_.gemm_operand_copy_writes(); }
  size_t kept_copy_bytes() const override { return inner_.kept_copy_bytes(); }
  void layernorm_forward_kept(const T* x, const T* g, const T* b, T* y, T* mean, T* rstd, int r, int c,
                              T eps) override {
    time("layernorm_forward", [&] { inner_.layernorm_forward_kept(x, g, b, y, mean, rstd, r, c, eps); });
  }
  void dropout_bias_backward_kept(const T* dy, T* dx, T* db, int r, int c, float p, RngKey k) override {
    time("dropout_bias_backward", [&] { inner_.dropout_bias_backward_kept(dy, dx, db, r, c, p, k); });
  }
  void bias_gelu_backward_kept(const T* dact, const T* pre, T* dpre, T* db, int r, int c) override {
    time("bias_gelu_backward", [&] { inner_.bias_gelu_backward_kept(dact, pre, dpre, db, r, c); });
  }
  void bias_add_forward(T* y, const T* b, int r, int c) override {
    time("bias_add_forward", [&] { inner_.bias_add_forward(y, b, r, c); });
  }
  void bias_add_backward(const T* dy, T* db, int r, int c) override {
    time("bias_add_backward", [&] { inner_.bias_add_backward(dy, db, r, c); });
  }
  void dropout_forward_kept(const T* x, T* y, size_t n, float p, RngKey k) override {
    time("dropout_forward", [&] { inner_.dropout_forward_kept(x, y, n, p, k); });
  }
  void bias_add_backward_kept(const T* dy, T* db, int r, int c) override {
    time("bias_add_backward", [&] { inner_.bias_add_backward_kept(dy, db, r, c); });
  }
  void add_forward(const T* a, const T* b, T* y, size_t n) override {
    time("add_forward", [&] { inner_.add_forward(a, b, y, n); });
  }
  void accumulate(T* d, const T* s, size_t n) override { time("accumulate", [&] { inner_.accumulate(d, s, n); }); }
  void layernorm_forward(const T* x, const T* g, const T* b, T* y, T* mean, T* rstd, int r, int c, T eps) override {
    time("layernorm_forward", [&] { inner_.layernorm_forward(x, g, b, y, mean, rstd, r, c, eps); });
  }
  void layernorm_backward(const T* dy, const T* x, const T* g, const T* mean, const T* rstd, T* dx, T* dg, T* db,
                          int r, int c) override {
    time("layernorm_backward", [&] { inner_.layernorm_backward(dy, x, g, mean, rstd, dx, dg, db, r, c); });
  }
  void bias_gelu_forward(T* pre, const T* b, T* act, int r, int c) override {
    time("bias_gelu_forward", [&] { inner_.bias_gelu_forward(pre, b, act, r, c); });
  }
  bool kept_outputs_unwritten() const override { return inner_.kept_outputs_unwritten(); }
  void bias_gelu_forward_kept(T* pre, const T* b, T* act, int r, int c) override {
    time("bias_gelu_forward", [&] { inner_.bias_gelu_forward_kept(pre, b, act, r, c); });
  }
  void bias_gelu_backward(const T* dact, const T* pre, T* dpre, T* db, int r, int c) override {
    time("bias_gelu_backward", [&] { inner_.bias_gelu_backward(dact, pre, dpre, db, r, c); });
  }
  void bias_dropout_residual_forward(T* y, const T* b, const T* res, int r, int c, float p, RngKey k) override {
    time("bias_dropout_residual_forward", [&] { inner_.bias_dropout_residual_forward(y, b, res, r, c, p, k); });
  }
  void dropout_bias_backward(const T* dy, T* dx, T* db, int r, int c, float p, RngKey k) override {
    time("dropout_bias_backward", [&] { inner_.dropout_bias_backward(dy, dx, db, r, c, p, k); });
  }
  void gelu_forward(const T* x, T* y, size_t n) override { time("gelu_forward", [&] { inner_.gelu_forward(x, y, n); }); }
  void gelu_backward(const T* dy, const T* x, T* dx, size_t n) override {
    time("gelu_backward", [&] { inner_.gelu_backward(dy, x, dx, n); });
  }
  void tanh_forward(const T* x, T* y, size_t n) override { time("tanh_forward", [&] { inner_.tanh_forward(x, y, n); }); }
  void tanh_backward(const T* dy, const T* y, T* dx, size_t n) override {
    time("tanh_backward", [&] { inner_.tanh_backward(dy, y, dx, n); });
  }
  void dropout_forward(const T* x, T* y, size_t n, float p, RngKey k) override {
    time("dropout_forward", [&] { inner_.dropout_forward(x, y, n, p, k); });
  }
  void dropout_backward(const T* dy, T* dx, size_t n, float p, RngKey k) override {
    time("dropout_backward", [&] { inner_.dropout_backward(dy, dx, n, p, k); });
  }
  void softmax_forward(const T* s, const int32_t* m, T* p, int b, int h, int sq, T sc) override {
    time("softmax_forward", [&] { inner_.softmax_forward(s, m, p, b, h, sq, sc); });
  }
  void softmax_backward(const T* dp, const T* p, T* ds, int b, int h, int sq, T sc) override {
    time("softmax_backward", [&] { inner_.softmax_backward(dp, p, ds, b, h, sq, sc); });
  }
  void softmax_dropout_forward(const T* s, const int32_t* m, T* p, T* pd, int b, int h, int sq, T sc, float dp,
                               RngKey k) override {
    time("softmax_dropout_forward", [&] { inner_.softmax_dropout_forward(s, m, p, pd, b, h, sq, sc, dp, k); });
  }
  void dropout_softmax_backward(T* dpd, const T* p, T* ds, int b, int h, int sq, T sc, float dp,
                                RngKey k) override {
    time("dropout_softmax_backward", [&] { inner_.dropout_softmax_backward(dpd, p, ds, b, h, sq, sc, dp, k); });
  }
  void softmax_dropout_forward_kept(const T* s, const int32_t* m, T* p, T* pd, int b, int h, int sq, T sc, float dp,
                                    RngKey k) override {
    time("softmax_dropout_forward", [&] { inner_.softmax_dropout_forward_kept(s, m, p, pd, b, h, sq, sc, dp, k); });
  }
  void softmax_backward_kept(T* dpd, const T* p, T* ds, int b, int h, int sq, T sc, float dp, RngKey k) override {
    time(dp > 0 ? "dropout_softmax_backward" : "softmax_backward",
         [&] { inner_.softmax_backward_kept(dpd, p, ds, b, h, sq, sc, dp, k); });
  }
  void embedding_forward(const int32_t* ids, const T* t, T* o, int n, int d, bool acc) override {
    time("embedding_forward", [&] { inner_.embedding_forward(ids, t, o, n, d, acc); });
  }
  void embedding_backward(const int32_t* ids, const T* dout, T* dt, int n, int d) override {
    time("embedding_backward", [&] { inner_.embedding_backward(ids, dout, dt, n, d); });
  }
  void gather_rows_forward(const T* s, const int32_t* idx, T* d, int n, int dim) override {
    time("gather_rows_forward", [&] { inner_.gather_rows_forward(s, idx, d, n, dim); });
  }
  void gather_rows_backward(const T* dd, const int32_t* idx, T* ds, int n, int dim) override {
    time("gather_rows_backward", [&] { inner_.gather_rows_backward(dd, idx, ds, n, dim); });
  }
  void cross_entropy_forward(const T* l, const int32_t* lab, T* loss, int32_t* c, int r, int k) override {
    time("cross_entropy_forward", [&] { inner_.cross_entropy_forward(l, lab, loss, c, r, k); });
  }
  void cross_entropy_backward(const T* l, const int32_t* lab, T* dl, int r, int k, T w) override {
    time("cross_entropy_backward", [&] { inner_.cross_entropy_backward(l, lab, dl, r, k, w); });
  }
  // Forwarded whole, so a fused attention is what gets timed; the GEMMs and softmax inside the
  // hand-written one are then charged to these rows, not to gemm_batched/softmax_*.
  AttentionImpl attention_forward(const AttentionForward<T>& a) override {
    AttentionImpl impl = AttentionImpl::kNative;
    time("attention_forward", [&] { impl = inner_.attention_forward(a); });
    return impl;
  }
  void attention_backward(const AttentionBackward<T>& a) override {
    time("attention_backward", [&] { inner_.attention_backward(a); });
  }

 private:
  template <typename F>
  void time(const char* name, F&& f) {
    if (sync_) sync_();
    const auto t0 = std::chrono::steady_clock::now();
    f();
    if (sync_) sync_();
    Entry& e = entries_[name];
    e.seconds += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    ++e.calls;
  }

  Ops<T>& inner_;
  std::function<void()> sync_;
  std::map<std::string, Entry> entries_;
};

}  // namespace lansbert
