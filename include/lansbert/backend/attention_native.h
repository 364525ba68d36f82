// The hand-written attention: Ops<T>'s default attention_forward/backward, and the reference
// a fused backend is checked against and falls back to. Included at the end of ops.h (it
// needs the complete Ops<T>); include ops.h, not this file.
//
//   scores = q k^T                       two-level batched GEMM over (sequence, head)
//   probs  = softmax(scale * scores)     over the unmasked keys of each row
//   pd     = dropout(probs)              when dropout > 0 (Philox, redrawn in backward);
//                                        with the softmax in one op (softmax_dropout_*)
//   ctx    = pd v
#pragma once

#include <cstdint>

namespace lansbert {

namespace attention_detail {

// Batches of the attention GEMMs, over (sequence, head): (S, D) slices of [B*S, ld] row
// tensors (each operand with its own row stride: q, k, v and their gradients have
// qkv_stride(), ctx and d_ctx have ld) and (S, S) blocks of the [B, A, S, S] tensors.
inline GemmBatch qk_batch(const AttentionShape& s, int a_ld, int b_ld) {  // A, B: slices; C: blocks
  GemmBatch g;
  g.outer = s.batch;
  g.inner = s.heads;
  g.a_outer = int64_t(s.seq) * a_ld;
  g.b_outer = int64_t(s.seq) * b_ld;
  g.a_inner = g.b_inner = s.head_dim;
  g.c_outer = int64_t(s.heads) * s.seq * s.seq;
  g.c_inner = int64_t(s.seq) * s.seq;
  return g;
}
inline GemmBatch pv_batch(const AttentionShape& s, int b_ld, int c_ld) {  // A: blocks; B, C: slices
  GemmBatch g;
  g.outer = s.batch;
  g.inner = s.heads;
  g.a_outer = int64_t(s.heads) * s.seq * s.seq;
  g.a_inner = int64_t(s.seq) * s.seq;
  g.b_outer = int64_t(s.seq) * b_ld;
  g.c_outer = int64_t(s.seq) * c_ld;
  g.b_inner = g.c_inner = s.head_dim;
  return g;
}
inline size_t probs_size(const AttentionShape& s) {
  return size_t(s.batch) * s.heads * s.seq * s.seq;
}

// Calls f(x, n) for the spans q, k and v lie in, to keep them as GEMM operands from the forward
// to the backward (Ops::keep_gemm_operand): the model's packed [B*S, 3H] tensor as one span
// (a strided head slice's extent covers all three column blocks, so casting q, k and v at
// each GEMM would cast the whole tensor each time), three separate tensors as three spans.
// Other layouts (views that overlap some other way) are not kept.
template <typename T, typename F>
void for_each_qkv_span(const AttentionShape& s, const T* q, const T* k, const T* v, F&& f) {
  const size_t rows = size_t(s.batch) * s.seq, H = size_t(s.ld), Q = size_t(s.qkv_stride());
  if (Q == 3 * H && k == q + H && v == q + 2 * H) {
    f(q, rows * Q);
    return;
  }
  if (Q != H) return;
  const size_t bytes = rows * H * sizeof(T);
  auto apart = [bytes](const T* a, const T* b) {
    const auto x = reinterpret_cast<uintptr_t>(a), y = reinterpret_cast<uintptr_t>(b);
    return x + bytes <= y || y + bytes <= x;
  };
  if (!apart(q, k) || !apart(q, v) || !apart(k, v)) return;
  for (const T* p : {q, k, v}) f(p, rows * H);
}

// AttentionBackward::d_qkv_bias's layout: d_q, d_k, d_v the column blocks of one tensor.
template <typename T>
void check_qkv_bias_layout(const AttentionBackward<T>& a) {
  const AttentionShape& s = a.shape;
  LB_CHECK_MSG(a.d_qkv_kept && s.qkv_stride() == 3 * s.ld && a.d_k == a.d_q + s.ld && a.d_v == a.d_q + 2 * s.ld,
               "attention backward: d_qkv_bias needs d(q, k, v) kept, packed as one [B*S, 3 * ld] tensor");
}

}  // namespace attention_detail

template <typename T>
AttentionImpl native_attention_forward(Ops<T>& ops, const AttentionForward<T>& a) {
  using namespace attention_detail;
  const AttentionShape& s = a.shape;
  const int S = s.seq, D = s.head_dim, H = s.ld, Q = s.qkv_stride();
  // A model lays out no probability slots where the ops say every call runs the flash attention.
  LB_CHECK_MSG(a.probs && a.scores && (a.probs_drop || a.dropout == 0),
               "attention: the hand-written attention ran without [B, A, S, S] slots (Ops::attention_runs_flash "
               "promised the flash attention)");
  // q, k, v and the (dropped-out) probabilities are GEMM operands again in the backward: kept
  // until native_attention_backward drops them (16-bit GEMMs cast each once).
  if (!a.qkv_kept)
    for_each_qkv_span(s, a.q, a.k, a.v, [&](const T* x, size_t n) { ops.keep_gemm_operand(x, n); });
  ops.gemm_batched(Trans::kNo, Trans::kYes, S, S, D, T(1), a.q, Q, a.k, Q, T(0), a.scores, S, qk_batch(s, Q, Q));
  const T* pd = a.probs;
  if (a.dropout > 0) {
    // The dropped-out probabilities are read only by GEMMs (here and in the backward's d(v)):
    // produced straight into their kept 16-bit copy where the backend converts operands.
    ops.softmax_dropout_forward_kept(a.scores, a.key_mask, a.probs, a.probs_drop, s.batch, s.heads, S, a.scale,
                                     a.dropout, a.dropout_key);
    pd = a.probs_drop;
  } else {
    ops.softmax_forward(a.scores, a.key_mask, a.probs, s.batch, s.heads, S, a.scale);  // the backward reads them too
    ops.keep_gemm_operand(pd, probs_size(s));
  }
  if (a.ctx_kept)  // read only by the output projection's GEMMs: written as its kept copy
    ops.gemm_batched_kept(Trans::kNo, Trans::kNo, S, D, S, pd, S, a.v, Q, a.ctx, H, pv_batch(s, Q, H));
  else
    ops.gemm_batched(Trans::kNo, Trans::kNo, S, D, S, T(1), pd, S, a.v, Q, T(0), a.ctx, H, pv_batch(s, Q, H));
  return AttentionImpl::kNative;
}

template <typename T>
void native_attention_backward(Ops<T>& ops, const AttentionBackward<T>& a) {
  using namespace attention_detail;
  const AttentionShape& s = a.shape;
  const int S = s.seq, D = s.head_dim, H = s.ld, Q = s.qkv_stride();
  const T* pd = a.dropout > 0 ? a.probs_drop : a.probs;
  // d(pd) = d(ctx) v^T ;  d(v) = pd^T d(ctx)   (d(ctx), then d(scores), is held across its
  // two GEMMs: 16-bit GEMMs convert it once)
  {
    HeldGemmOperand<T> held(ops, a.d_ctx, size_t(s.batch) * S * H, a.d_ctx_kept);
    ops.gemm_batched(Trans::kNo, Trans::kYes, S, S, D, T(1), a.d_ctx, H, a.v, Q, T(0), a.d_probs, S,
                     qk_batch(s, H, Q));
    ops.gemm_batched(Trans::kYes, Trans::kNo, S, D, S, T(1), pd, S, a.d_ctx, H, T(0), a.d_v, Q, pv_batch(s, H, Q));
  }
  // d(scores) is read only by the two GEMMs below: produced straight into its kept copy.
  ops.softmax_backward_kept(a.d_probs, a.probs, a.d_scores, s.batch, s.heads, S, a.scale, a.dropout, a.dropout_key);
  // d(q) = d(scores) k ;  d(k) = d(scores)^T q
  ops.gemm_batched(Trans::kNo, Trans::kNo, S, D, S, T(1), a.d_scores, S, a.k, Q, T(0), a.d_q, Q, pv_batch(s, Q, Q));
  ops.gemm_batched(Trans::kYes, Trans::kNo, S, D, S, T(1), a.d_scores, S, a.q, Q, T(0), a.d_k, Q, pv_batch(s, Q, Q));
  ops.drop_gemm_operand(a.d_scores);
  ops.drop_gemm_operand(pd);  // kept since the forward
  for_each_qkv_span(s, a.q, a.k, a.v, [&](const T* x, size_t) { ops.drop_gemm_operand(x); });
  if (a.d_qkv_kept)  // a fused backend's fallback: the contract of AttentionBackward::d_qkv_kept
    for_each_qkv_span(s, a.d_q, a.d_k, a.d_v, [&](const T* x, size_t n) { ops.keep_gemm_operand(x, n); });
  if (a.d_qkv_bias) {
    check_qkv_bias_layout(a);
    ops.bias_add_backward_of_kept(a.d_q, a.d_qkv_bias, s.batch * S, 3 * H);
  }
}

template <typename T>
AttentionImpl Ops<T>::attention_forward(const AttentionForward<T>& a) {
  return native_attention_forward(*this, a);
}

template <typename T>
void Ops<T>::attention_backward(const AttentionBackward<T>& a) {
  LB_CHECK_MSG(a.impl == AttentionImpl::kNative,
               "attention_backward: the forward ran a fused attention this backend does not have");
  native_attention_backward(*this, a);
}

}  // namespace lansbert
