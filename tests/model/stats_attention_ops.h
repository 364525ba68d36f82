// A CPU stand-in for a fused attention that saves only softmax statistics (what the CUDA
// backend's cuDNN path does, AttentionImpl::kFused), so that the model's handling of such an
// attention (ModelLimits::attention_stats, recomputation skipped for fused layers, the
// layers that fall back recomputed) runs on a machine without a GPU. Every other op goes to
// the wrapped ops. Like the CUDA backend in its cudnn/auto modes, it says the attention does
// not read q/k/v, ctx and d(ctx) only as GEMM operands (so the model writes them in fp32),
// and its fused forward keeps no GEMM-operand copies.
//
// Forward: the hand-written attention for ctx, then Stats = max + log(sum exp) of each row's
// scaled, masked scores, written to AttentionForward::stats (or the start of `probs`, as the
// CUDA path does without it); returns kFused. The first layer it sees (by its q) always
// falls back instead: the hand-written forward, kNative. Backward of a kFused forward: the
// probabilities again from q, k and the saved Stats alone (P = exp(s * scale - Stats), the
// flash-attention backward's recomputation), the dropout from the key, then the hand-written
// backward. The probabilities' bits differ from the hand-written softmax's, so results equal
// across Recompute modes only while every fused layer's statistics survive to its backward.
#pragma once

#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "lansbert/backend/attention_native.h"
#include "lansbert/backend/profiling_ops.h"
#include "lansbert/kernels/dropout.h"

namespace lansbert::testing {

template <typename T>
class StatsAttentionOps final : public ProfilingOps<T> {
 public:
  explicit StatsAttentionOps(Ops<T>& inner) : ProfilingOps<T>(inner), inner_(inner) {}

  long forwards = 0;  // attention_forward calls (recomputations included)

  bool attention_reads_only_gemm_operands() const override { return false; }

  AttentionImpl attention_forward(const AttentionForward<T>& a) override {
    ++forwards;
    if (!fallback_q_) fallback_q_ = a.q;
    if (a.q == fallback_q_) return native_attention_forward(inner_, a);
    native_attention_forward(inner_, a);  // ctx; a.scores keeps q k^T
    // A fused forward keeps no operand copies (its backward converts what it reads).
    const AttentionShape& s = a.shape;
    inner_.drop_gemm_operand(a.dropout > 0 ? a.probs_drop : a.probs);
    attention_detail::for_each_qkv_span(s, a.q, a.k, a.v, [&](const T* x, size_t) { inner_.drop_gemm_operand(x); });
    T* stats = a.stats_slot();
    for_each_row(s, [&](size_t row, int b) {
      const T* sc = a.scores + row * s.seq;
      T mx = -std::numeric_limits<T>::infinity();
      for (int j = 0; j < s.seq; ++j)
        if (a.key_mask[size_t(b) * s.seq + j]) mx = std::max(mx, sc[j] * a.scale);
      T sum = 0;
      for (int j = 0; j < s.seq; ++j)
        if (a.key_mask[size_t(b) * s.seq + j]) sum += std::exp(sc[j] * a.scale - mx);
      stats[row] = mx + std::log(sum);
    });
    return AttentionImpl::kFused;
  }

  void attention_backward(const AttentionBackward<T>& a) override {
    if (a.impl != AttentionImpl::kFused) return inner_.attention_backward(a);
    const AttentionShape& s = a.shape;
    const int Q = s.qkv_stride();
    // P into d_probs first: without AttentionForward::stats the statistics share probs' memory.
    inner_.gemm_batched(Trans::kNo, Trans::kYes, s.seq, s.seq, s.head_dim, T(1), a.q, Q, a.k, Q, T(0), a.d_scores,
                        s.seq, attention_detail::qk_batch(s, Q, Q));
    const T* stats = a.stats_slot();
    for_each_row(s, [&](size_t row, int b) {
      for (int j = 0; j < s.seq; ++j) {
        const size_t e = row * s.seq + j;
        a.d_probs[e] = a.key_mask[size_t(b) * s.seq + j] ? std::exp(a.d_scores[e] * a.scale - stats[row]) : T(0);
      }
    });
    // As the hand-written forward leaves them: the (dropped-out) probabilities kept as the P V
    // operand, the probabilities themselves in `probs`. Where the dropped-out ones have no
    // memory of their own (probs_drop == probs, Ops::kept_outputs_unwritten) they pass
    // through `probs` into the kept copy first.
    const size_t n = attention_detail::probs_size(s);
    T* probs = const_cast<T*>(a.probs);
    T* pd = a.dropout > 0 ? const_cast<T*>(a.probs_drop) : probs;
    if (a.dropout > 0)
      for (size_t e = 0; e < n; ++e) pd[e] = kern::dropout_apply(a.d_probs[e], a.dropout_key, e, a.dropout);
    else
      std::copy(a.d_probs, a.d_probs + n, pd);
    inner_.keep_gemm_operand(pd, n);
    std::copy(a.d_probs, a.d_probs + n, probs);
    AttentionBackward<T> native = a;
    native.impl = AttentionImpl::kNative;
    native_attention_backward(inner_, native);
  }

 private:
  // f(row, b) for every row (b, h, i) of the [B, A, S, S] scores.
  template <typename F>
  static void for_each_row(const AttentionShape& s, F&& f) {
    for (int b = 0; b < s.batch; ++b)
      for (int h = 0; h < s.heads; ++h)
        for (int i = 0; i < s.seq; ++i) f((size_t(b) * s.heads + h) * s.seq + i, b);
  }

  Ops<T>& inner_;
  const T* fallback_q_ = nullptr;
};

}  // namespace lansbert::testing
