// The pretraining heads on top of the encoder output (N, H):
//   MLM: gather the Pt = B*P masked slots, dense -> GELU -> LayerNorm, then logits against the
//        word embeddings (tied decoder) plus cls.predictions.bias; cross-entropy, unused
//        slots (label -1) ignored. Computing only the masked rows saves (S/P)x the vocab GEMM.
//   NSP: the [CLS] row, pooler dense -> tanh, then a 2-way classifier; cross-entropy.
// The backward pass of loss_weight * (mean MLM loss + mean NSP loss) writes d(hidden) to dh.
#include "bert_model_impl.h"
#include "linear.h"

namespace lansbert {

template <typename T>
void heads_forward(BertState<T>& m, const T* hidden) {
  Ops<T>& ops = *m.ops;
  const BertConfig& c = *m.config;
  const int H = c.hidden, V = c.vocab_size, Pt = m.Pt, B = m.B;

  ops.gather_rows_forward(hidden, m.mlm_index, m.mlm_x, Pt, H);
  linear_gemm(ops, m.mlm_x, m.p(m.mlm_dense.w), m.mlm_pre, Pt, H, H);
  ops.bias_gelu_forward(m.mlm_pre, m.p(m.mlm_dense.b), m.mlm_act, Pt, H);
  ops.layernorm_forward(m.mlm_act, m.p(m.mlm_ln.w), m.p(m.mlm_ln.b), m.mlm_norm, m.mlm_mean,
                        m.mlm_rstd, Pt, H, T(c.layernorm_eps));
  linear_forward(ops, m.mlm_norm, m.p(m.word), m.p(m.mlm_bias), m.mlm_logits, Pt, H, V);
  ops.cross_entropy_forward(m.mlm_logits, m.mlm_labels, m.mlm_losses, m.mlm_correct, Pt, V);

  ops.gather_rows_forward(hidden, m.cls_index, m.cls_x, B, H);
  linear_forward(ops, m.cls_x, m.p(m.pooler.w), m.p(m.pooler.b), m.pool_pre, B, H, H);
  ops.tanh_forward(m.pool_pre, m.pooled, size_t(B) * H);
  linear_forward(ops, m.pooled, m.p(m.nsp.w), m.p(m.nsp.b), m.nsp_logits, B, H, 2);
  ops.cross_entropy_forward(m.nsp_logits, m.nsp_labels, m.nsp_losses, m.nsp_correct, B, 2);
}

template <typename T>
void heads_backward(BertState<T>& m, T loss_weight) {
  Ops<T>& ops = *m.ops;
  const BertConfig& c = *m.config;
  const int H = c.hidden, V = c.vocab_size, Pt = m.Pt, B = m.B;
  const size_t NH = size_t(m.N) * H;
  ops.zero(m.dh, NH);

  // MLM: the mean over the batch's masked slots.
  const T w_mlm = m.mlm_count > 0 ? loss_weight / T(m.mlm_count) : T(0);
  ops.cross_entropy_backward(m.mlm_logits, m.mlm_labels, m.d_mlm_logits, Pt, V, w_mlm);
  linear_backward(ops, m.d_mlm_logits, m.mlm_norm, m.p(m.word), m.d_m1, m.g(m.word), m.g(m.mlm_bias), Pt, H, V);
  ops.layernorm_backward(m.d_m1, m.mlm_act, m.p(m.mlm_ln.w), m.mlm_mean, m.mlm_rstd, m.d_m2,
                         m.g(m.mlm_ln.w), m.g(m.mlm_ln.b), Pt, H);
  ops.bias_gelu_backward(m.d_m2, m.mlm_pre, m.d_m2, m.g(m.mlm_dense.b), Pt, H);
  linear_backward(ops, m.d_m2, m.mlm_x, m.p(m.mlm_dense.w), m.d_m1, m.g(m.mlm_dense.w), nullptr, Pt, H, H);
  ops.gather_rows_backward(m.d_m1, m.mlm_index, m.dh, Pt, H);

  // NSP: the mean over sequences.
  ops.cross_entropy_backward(m.nsp_logits, m.nsp_labels, m.d_nsp_logits, B, 2, loss_weight / T(B));
  linear_backward(ops, m.d_nsp_logits, m.pooled, m.p(m.nsp.w), m.d_p1, m.g(m.nsp.w), m.g(m.nsp.b), B, H, 2);
  ops.tanh_backward(m.d_p1, m.pooled, m.d_p1, size_t(B) * H);
  linear_backward(ops, m.d_p1, m.cls_x, m.p(m.pooler.w), m.d_p2, m.g(m.pooler.w), m.g(m.pooler.b), B, H, H);
  ops.gather_rows_backward(m.d_p2, m.cls_index, m.dh, B, H);
}

template void heads_forward<float>(BertState<float>&, const float*);
template void heads_forward<double>(BertState<double>&, const double*);
template void heads_backward<float>(BertState<float>&, float);
template void heads_backward<double>(BertState<double>&, double);

}  // namespace lansbert
