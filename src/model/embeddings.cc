// BERT embeddings: word + position + token-type lookups, LayerNorm, dropout. The backward
// pass scatters the sum's gradient into all three tables (deterministically; the word table
// also receives the tied MLM decoder's gradient in pretraining_heads.cc).
#include "bert_model_impl.h"

namespace lansbert {

template <typename T>
void embeddings_forward(BertState<T>& m) {
  Ops<T>& ops = *m.ops;
  const BertConfig& c = *m.config;
  const int N = m.N, H = c.hidden;
  ops.embedding_forward(m.ids, m.p(m.word), m.emb_sum, N, H, false);
  ops.embedding_forward(m.pos_ids, m.p(m.pos), m.emb_sum, N, H, true);
  ops.embedding_forward(m.seg, m.p(m.type), m.emb_sum, N, H, true);
  ops.layernorm_forward(m.emb_sum, m.p(m.emb_ln.w), m.p(m.emb_ln.b), m.emb_out, m.emb_mean,
                        m.emb_rstd, N, H, T(c.layernorm_eps));
  const float p = m.ctx.train ? c.hidden_dropout : 0.0f;
  // The first layer's input: its GEMMs read the 16-bit copy, written in the same pass.
  ops.dropout_forward_kept(m.emb_out, m.emb_out, size_t(N) * H, p,
                           RngKey{m.ctx.seed, m.ctx.step, dropout_site_embeddings()});
}

template <typename T>
void embeddings_backward(BertState<T>& m) {
  Ops<T>& ops = *m.ops;
  const BertConfig& c = *m.config;
  const int N = m.N, H = c.hidden;
  const float p = m.ctx.train ? c.hidden_dropout : 0.0f;
  ops.dropout_backward(m.dh, m.dh, size_t(N) * H, p,
                       RngKey{m.ctx.seed, m.ctx.step, dropout_site_embeddings()});
  ops.layernorm_backward(m.dh, m.emb_sum, m.p(m.emb_ln.w), m.emb_mean, m.emb_rstd, m.d_a,
                         m.g(m.emb_ln.w), m.g(m.emb_ln.b), N, H);
  ops.embedding_backward(m.ids, m.d_a, m.g(m.word), N, H);
  ops.embedding_backward(m.pos_ids, m.d_a, m.g(m.pos), N, H);
  ops.embedding_backward(m.seg, m.d_a, m.g(m.type), N, H);
}

template void embeddings_forward<float>(BertState<float>&);
template void embeddings_forward<double>(BertState<double>&);
template void embeddings_backward<float>(BertState<float>&);
template void embeddings_backward<double>(BertState<double>&);

}  // namespace lansbert
