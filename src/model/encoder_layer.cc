// One post-LN transformer encoder layer (BERT):
//   [q k v] = x [Wq; Wk; Wv]^T + [bq bk bv]    one GEMM into (N, 3H); q, k, v are its column
//                                              blocks, head a of q reads columns [a*D, a*D+D)
//   ctx     = dropout(softmax(q k^T / sqrt(D), mask)) v    Ops::attention_forward (one entry
//                                              point, so a backend may fuse it)
//   h1      = LN(x + dropout(ctx Wo^T + bo))
//   h2      = LN(h1 + dropout(gelu(h1 Wi^T + bi) Wo2^T + bo2))
// The projections and the FFN's first GEMM add their bias in the GEMM's epilogue (gemm_bias);
// the GELU and the bias, dropout, residual and LayerNorm steps after the output GEMMs go
// through Ops' fused passes (gelu_forward_kept, residual_layernorm_forward and the backward
// epilogues).
// Heads are addressed in place inside the (N, 3H) and (N, H) tensors (attention.h's `qkv_ld`
// and `ld`). One projection GEMM instead of three reads x (and in the backward d[q k v] and
// x) once rather than three times, and needs no accumulating passes over d(x): what
// Megatron-LM and NVIDIA's BERT do too.
// The four GEMM inputs (x, ctx, h1, gelu output) are read again by the backward's dW GEMMs:
// they are kept (Ops::keep_gemm_operand) from the forward to their backward, so 16-bit GEMMs
// cast each once per micro-step; an eval forward's are kept until the next forward keeps
// them again or the model ends (BertModel::~BertModel). q/k/v, ctx and d(ctx) are read only
// by GEMMs (with the hand-written attention): their GEMMs produce them kept (Ops::*_kept GEMMs),
// as 16-bit copies only where the backend converts operands. With 16-bit activations the dense
// outputs res1 and res2 are produced the same way (dense_output_gemm), though no GEMM reads
// them: the copy is where the residual pass writes the LayerNorm's input sum and its backward
// reads it (BertState::residual_copy_only).
#include <cmath>

#include "bert_model_impl.h"
#include "linear.h"

namespace lansbert {

namespace {

template <typename T>
AttentionShape attn_shape(const BertState<T>& m) {
  const BertConfig& c = *m.config;
  return {m.R, c.heads, m.S, c.head_dim(), c.hidden, 3 * c.hidden};
}

template <typename T>
float drop_p(const BertState<T>& m, float p) {
  return m.ctx.train ? p : 0.0f;
}

template <typename T>
RngKey key(const BertState<T>& m, uint32_t site) {
  return RngKey{m.ctx.seed, m.ctx.step, site};
}

// The fields AttentionForward and AttentionBackward share: shape, scale, dropout, mask and
// the q, k, v of layer l (and its saved probabilities).
template <typename T, typename Args>
void attention_common(const BertState<T>& m, int l, Args* x) {
  const BertConfig& c = *m.config;
  const LayerActs<T>& a = m.layers[l];
  x->shape = attn_shape(m);
  x->scale = T(1) / std::sqrt(T(x->shape.head_dim));
  x->dropout = drop_p(m, c.attention_dropout);
  x->dropout_key = key(m, dropout_site(l, 0));
  x->key_mask = m.mask;
  x->key_lengths = m.key_lengths_valid ? m.key_lengths : nullptr;
  x->q = a.q;
  x->k = a.k;
  x->v = a.v;
  x->probs = a.probs;
  x->probs_drop = x->dropout > 0 ? a.probs_drop : nullptr;
  x->stats = a.stats;
}

// The end of residual block `which` (1: attention, 2: FFN) of layer l: y (the dense layer's
// output) + its bias, the hidden dropout, the residual, then the LayerNorm `ln` into out.
template <typename T>
ResidualLayerNorm<T> residual_norm(const BertState<T>& m, int l, int which, T* y, const T* bias, const T* residual,
                                   const LinearParams& ln, T* out, T* mean, T* rstd, bool keep_out) {
  ResidualLayerNorm<T> r;
  r.y = y;
  r.bias = bias;
  r.residual = residual;
  r.rows = m.N;
  r.cols = m.config->hidden;
  r.p = drop_p(m, m.config->hidden_dropout);
  r.key = key(m, dropout_site(l, which));
  r.gamma = m.p(ln.w);
  r.beta = m.p(ln.b);
  r.out = out;
  r.mean = mean;
  r.rstd = rstd;
  r.eps = T(m.config->layernorm_eps);
  r.keep_out = keep_out;
  // 16-bit residual stream (BertState::half_activations): the residual is the previous
  // LayerNorm's output (not the embeddings'), and out is written only as its copy where kept.
  r.residual_half = m.half_activations && (which == 2 || l > 0);
  r.out_copy_only = m.residual_copy_only && keep_out;
  r.sum_half = m.half_activations;
  r.sum_copy_only = m.residual_copy_only;
  return r;
}

// The dense layer before residual block end `y` (its bias comes in residual_norm's pass):
// y = x W^T [N, H], x being [N, in]. Where the residual stream is copies only, y is produced
// as its kept 16-bit copy only (residual_norm sums into it; the backward reads it there and
// drops it).
template <typename T>
void dense_output_gemm(BertState<T>& m, const T* x, const T* w, T* y, int in) {
  const int N = m.N, H = m.config->hidden;
  if (m.residual_copy_only)
    m.ops->gemm_kept(Trans::kNo, Trans::kYes, N, H, in, x, in, w, in, y, H);
  else
    linear_gemm(*m.ops, x, w, y, N, in, H);
}

// residual_norm's backward: d(out) to d(sum) (the residual's gradient) and d(y) (the dense
// layer's output gradient), with the LayerNorm's and the bias's parameter gradients.
template <typename T>
ResidualLayerNormGrad<T> residual_norm_grad(const BertState<T>& m, int l, int which, const T* dout, const T* sum,
                                            const LinearParams& ln, const T* mean, const T* rstd, T* dsum, T* dy,
                                            T* dbias) {
  ResidualLayerNormGrad<T> g;
  g.dout = dout;
  g.sum = sum;
  g.gamma = m.p(ln.w);
  g.mean = mean;
  g.rstd = rstd;
  g.dsum = dsum;
  g.dy = dy;
  g.dgamma = m.g(ln.w);
  g.dbeta = m.g(ln.b);
  g.dbias = dbias;
  g.rows = m.N;
  g.cols = m.config->hidden;
  g.p = drop_p(m, m.config->hidden_dropout);
  g.key = key(m, dropout_site(l, which));
  g.sum_copy_only = m.residual_copy_only;
  // The gradient stream (dout, dsum) in 16 bits too, held as copies where the residual stream is.
  g.grad_half = m.half_activations;
  g.grad_copy_only = m.residual_copy_only;
  return g;
}

}  // namespace

template <typename T>
void encoder_layer_forward(BertState<T>& m, int l, const T* x) {
  Ops<T>& ops = *m.ops;
  const BertConfig& c = *m.config;
  const LayerParams& p = m.layer_params[l];
  LayerActs<T>& a = m.layers[l];
  const int N = m.N, H = c.hidden, I = c.intermediate;

  // x is the q/k/v projection's GEMM input, here and in its dW: kept until the backward, and
  // written with its 16-bit copy by its producer (the previous layer's second LayerNorm, or
  // the embeddings' dropout).
  // q/k/v and ctx are read only by GEMMs when the attention is the hand-written one: they are
  // produced as their kept 16-bit copies where the backend converts operands (no fp32 write, no
  // cast pass), and kept as written otherwise.
  const bool kept = ops.attention_reads_only_gemm_operands();
  if (kept)
    linear_forward_kept(ops, x, m.p(p.qkv.w), m.p(p.qkv.b), a.qkv, N, H, 3 * H);
  else
    linear_forward(ops, x, m.p(p.qkv.w), m.p(p.qkv.b), a.qkv, N, H, 3 * H);
  encoder_layer_attention_forward(m, l);
  dense_output_gemm(m, a.ctx, m.p(p.attn_out.w), a.res1, H);
  // h1 feeds the FFN's GEMM (and its dW) and, in fp32, the second residual: kept as written.
  ops.residual_layernorm_forward(residual_norm(m, l, 1, a.res1, m.p(p.attn_out.b), x, p.ln1, a.h1, a.mean1, a.rstd1,
                                               /*keep_out=*/true));
  // The FFN's bias in its GEMM's epilogue (pre is written once), then the GELU, read only by
  // GEMMs: kept.
  // With 16-bit FFN activations the GEMM writes pre in 16 bits only, and the GELU reads that;
  // its fp32 scratch (where the backend needs one) is d(act)'s buffer, free in a forward.
  // One op (the GEMM's GELU epilogue where the backend has it).
  if (a.ffn_pre16) {
    ops.gemm_bias_gelu_half(Trans::kNo, Trans::kYes, N, I, H, a.h1, H, m.p(p.inter.w), H, m.p(p.inter.b), m.d_ffn,
                            a.ffn_pre16, a.ffn_act);
  } else {
    linear_forward(ops, a.h1, m.p(p.inter.w), m.p(p.inter.b), a.ffn_pre, N, H, I);
    ops.gelu_forward_kept(a.ffn_pre, a.ffn_act, size_t(N) * I);
  }
  dense_output_gemm(m, a.ffn_act, m.p(p.out.w), a.res2, I);
  // h2 is kept as the next layer's x.
  ops.residual_layernorm_forward(residual_norm(m, l, 2, a.res2, m.p(p.out.b), a.h1, p.ln2, a.h2, a.mean2, a.rstd2,
                                               /*keep_out=*/l + 1 < c.layers));
}

template <typename T>
void encoder_layer_attention_forward(BertState<T>& m, int l) {
  Ops<T>& ops = *m.ops;
  LayerActs<T>& a = m.layers[l];
  const bool kept = ops.attention_reads_only_gemm_operands();
  AttentionForward<T> f;
  attention_common(m, l, &f);
  f.ctx = a.ctx;
  f.scores = m.d_scores;  // backward scratch: free in the forward, and before a layer's backward
  f.qkv_kept = f.ctx_kept = kept;
  a.attn_impl = ops.attention_forward(f);
  if (!kept) ops.keep_gemm_operand(a.ctx, size_t(m.N) * m.config->hidden);
}

template <typename T>
void encoder_layer_backward(BertState<T>& m, int l, const T* x) {
  Ops<T>& ops = *m.ops;
  const BertConfig& c = *m.config;
  const LayerParams& p = m.layer_params[l];
  LayerActs<T>& a = m.layers[l];
  const int N = m.N, H = c.hidden, I = c.intermediate;

  // FFN block: dh = d(h2). The output gradients of the dense layers come with their 16-bit
  // copies (only GEMMs read them).
  ops.residual_layernorm_backward(residual_norm_grad(m, l, 2, m.dh, a.res2, p.ln2, a.mean2, a.rstd2, m.d_a, m.d_b,
                                                     m.g(p.out.b)));
  ops.drop_gemm_operand(a.res2);  // kept only where the residual stream is copies only
  // With 16-bit FFN activations d(act) is read only by the GELU backward, at its 16-bit
  // rounding: the data GEMM and the GELU backward are one op (gemm_dgelu_bias_half: the GEMM's
  // DGELU epilogue where the backend has it, else d(act) written as a kept copy and read back),
  // run while d_b's copy is still held; the weight GEMM (which drops it) then computes dW only.
  if (a.ffn_pre16)
    ops.gemm_dgelu_bias_half(Trans::kNo, Trans::kNo, N, I, H, m.d_b, H, m.p(p.out.w), I, a.ffn_pre16, m.d_ffn,
                             m.g(p.inter.b));
  linear_backward(ops, m.d_b, a.ffn_act, m.p(p.out.w), a.ffn_pre16 ? nullptr : m.d_ffn, m.g(p.out.w), nullptr, N, I,
                  H, {.dy_kept = true});
  ops.drop_gemm_operand(a.ffn_act);
  if (!a.ffn_pre16) ops.bias_gelu_backward_kept(m.d_ffn, a.ffn_pre, m.d_ffn, m.g(p.inter.b), N, I);
  // d_a holds the residual part of d(h1); the FFN input gradient is added to it (into its
  // 16-bit copy where the gradient stream is copies only).
  linear_backward(ops, m.d_ffn, a.h1, m.p(p.inter.w), m.d_a, m.g(p.inter.w), nullptr, N, H, I,
                  {.accumulate_dx = true, .dy_kept = true, .dx_kept = m.residual_copy_only});
  ops.drop_gemm_operand(a.h1);

  // Attention block: d_a = d(h1). d(res1) goes straight into dh (free since the FFN block read
  // it): it is the residual part of d(x), to which the projection's input gradient is added by
  // its GEMM (beta 1) instead of by a pass of its own.
  ops.residual_layernorm_backward(residual_norm_grad(m, l, 1, m.d_a, a.res1, p.ln1, a.mean1, a.rstd1, m.dh, m.d_c,
                                                     m.g(p.attn_out.b)));
  ops.drop_gemm_operand(a.res1);
  // d(ctx) is read only by the attention backward's GEMMs (when they are the hand-written ones).
  const bool kept = ops.attention_reads_only_gemm_operands();
  linear_backward(ops, m.d_c, a.ctx, m.p(p.attn_out.w), m.d_ctx, m.g(p.attn_out.w), nullptr, N, H, H,
                  {.dy_kept = true, .dx_kept = kept});

  AttentionBackward<T> b;
  attention_common(m, l, &b);
  b.impl = a.attn_impl;
  b.ctx = a.ctx;
  b.d_ctx = m.d_ctx;
  b.d_ctx_kept = kept;
  b.d_q = m.d_q;
  b.d_k = m.d_k;
  b.d_v = m.d_v;
  // With 16-bit activations d(q, k, v) goes straight into its kept copy where the attention can
  // write it so (the flash attention with kept copies); the projection's backward reads that.
  const bool dqkv_kept = m.half_activations && ops.attention_keeps_input_gradients();
  b.d_qkv_kept = dqkv_kept;
  // ... and then the attention also sums them into the projection's bias gradient (the flash
  // kernels as they write them, instead of a pass reading them back).
  T* const qkv_bias_grad = m.g(p.qkv.b);
  b.d_qkv_bias = dqkv_kept ? qkv_bias_grad : nullptr;
  b.d_probs = m.d_probs;
  b.d_scores = m.d_scores;
  ops.attention_backward(b);
  ops.drop_gemm_operand(a.ctx);  // after: the flash backward reads ctx's copy (D = d(ctx) . ctx)

  // d(x) = residual (already in dh) + the projection's input gradient.
  linear_backward(ops, m.d_qkv, x, m.p(p.qkv.w), m.dh, m.g(p.qkv.w), dqkv_kept ? nullptr : qkv_bias_grad, N, H, 3 * H,
                  {.accumulate_dx = true, .dy_kept = dqkv_kept, .dx_kept = m.residual_copy_only});
  ops.drop_gemm_operand(x);
}

template void encoder_layer_forward<float>(BertState<float>&, int, const float*);
template void encoder_layer_forward<double>(BertState<double>&, int, const double*);
template void encoder_layer_backward<float>(BertState<float>&, int, const float*);
template void encoder_layer_attention_forward<float>(BertState<float>&, int);
template void encoder_layer_attention_forward<double>(BertState<double>&, int);
template void encoder_layer_backward<double>(BertState<double>&, int, const double*);

}  // namespace lansbert
