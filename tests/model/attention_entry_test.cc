// Ops::attention_forward/backward: the default is exactly the composition the model spelled
// out before the entry point existed (same ops, same order, same bits), and the model hands
// a backend what a fused attention needs: the key lengths of prefix masks, and the forward's
// AttentionImpl back in the backward.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "lansbert/backend/cpu_ops.h"
#include "lansbert/backend/profiling_ops.h"
#include "lansbert/model/bert_model.h"
#include "model_test_util.h"

namespace lansbert {
namespace {

template <typename T>
std::vector<T> random_values(size_t n, uint32_t seed) {
  std::mt19937 g(seed);
  std::normal_distribution<double> d(0.0, 1.0);
  std::vector<T> v(n);
  for (T& x : v) x = T(d(g));
  return v;
}

template <typename T>
bool same_bits(const std::vector<T>& a, const std::vector<T>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(T)) == 0;
}

// The sequence of calls encoder_layer.cc made before attention_forward/backward existed,
// written out again as the oracle.
template <typename T>
void old_forward(Ops<T>& ops, const AttentionShape& s, T scale, float p, RngKey key, const int32_t* mask,
                 const T* q, const T* k, const T* v, T* scores, T* probs, T* probs_drop, T* ctx) {
  const int B = s.batch, A = s.heads, S = s.seq, D = s.head_dim, H = s.ld;
  GemmBatch qk{B, A, int64_t(S) * H, D, int64_t(S) * H, D, int64_t(A) * S * S, int64_t(S) * S};
  GemmBatch pv{B, A, int64_t(A) * S * S, int64_t(S) * S, int64_t(S) * H, D, int64_t(S) * H, D};
  ops.gemm_batched(Trans::kNo, Trans::kYes, S, S, D, T(1), q, H, k, H, T(0), scores, S, qk);
  ops.softmax_forward(scores, mask, probs, B, A, S, scale);
  const T* pd = probs;
  if (p > 0) {
    ops.dropout_forward(probs, probs_drop, size_t(B) * A * S * S, p, key);
    pd = probs_drop;
  }
  ops.gemm_batched(Trans::kNo, Trans::kNo, S, D, S, T(1), pd, S, v, H, T(0), ctx, H, pv);
}

template <typename T>
void old_backward(Ops<T>& ops, const AttentionShape& s, T scale, float p, RngKey key, const T* q, const T* k,
                  const T* v, const T* probs, const T* probs_drop, const T* d_ctx, T* d_probs, T* d_scores,
                  T* d_q, T* d_k, T* d_v) {
  const int B = s.batch, A = s.heads, S = s.seq, D = s.head_dim, H = s.ld;
  GemmBatch qk{B, A, int64_t(S) * H, D, int64_t(S) * H, D, int64_t(A) * S * S, int64_t(S) * S};
  GemmBatch pv{B, A, int64_t(A) * S * S, int64_t(S) * S, int64_t(S) * H, D, int64_t(S) * H, D};
  const T* pd = p > 0 ? probs_drop : probs;
  ops.gemm_batched(Trans::kNo, Trans::kYes, S, S, D, T(1), d_ctx, H, v, H, T(0), d_probs, S, qk);
  ops.gemm_batched(Trans::kYes, Trans::kNo, S, D, S, T(1), pd, S, d_ctx, H, T(0), d_v, H, pv);
  if (p > 0) ops.dropout_backward(d_probs, d_probs, size_t(B) * A * S * S, p, key);
  ops.softmax_backward(d_probs, probs, d_scores, B, A, S, scale);
  ops.gemm_batched(Trans::kNo, Trans::kNo, S, D, S, T(1), d_scores, S, k, H, T(0), d_q, H, pv);
  ops.gemm_batched(Trans::kYes, Trans::kNo, S, D, S, T(1), d_scores, S, q, H, T(0), d_k, H, pv);
}

template <typename T>
void check_default_is_old_composition(float p) {
  auto ops = cpu::make_ops<T>();
  const AttentionShape s{3, 2, 7, 4, 8};  // B, A, S, D, ld = A * D
  const size_t NH = size_t(s.batch) * s.seq * s.ld, P = size_t(s.batch) * s.heads * s.seq * s.seq;
  const T scale = T(1) / std::sqrt(T(s.head_dim));
  const RngKey key{7, 3, 1};
  // Padding in two sequences, one of them not a prefix (the default takes any mask).
  std::vector<int32_t> mask(size_t(s.batch) * s.seq, 1);
  mask[1 * s.seq + 5] = mask[1 * s.seq + 6] = 0;
  mask[2 * s.seq + 2] = 0;
  const std::vector<T> q = random_values<T>(NH, 1), k = random_values<T>(NH, 2), v = random_values<T>(NH, 3),
                       d_ctx = random_values<T>(NH, 4);

  std::vector<T> scores(P), probs(P), probs_drop(P), ctx(NH);
  old_forward<T>(*ops, s, scale, p, key, mask.data(), q.data(), k.data(), v.data(), scores.data(), probs.data(),
                 probs_drop.data(), ctx.data());
  std::vector<T> scores2(P), probs2(P), probs_drop2(P), ctx2(NH);
  AttentionForward<T> f;
  f.shape = s;
  f.scale = scale;
  f.dropout = p;
  f.dropout_key = key;
  f.key_mask = mask.data();
  f.q = q.data();
  f.k = k.data();
  f.v = v.data();
  f.ctx = ctx2.data();
  f.probs = probs2.data();
  f.probs_drop = p > 0 ? probs_drop2.data() : nullptr;
  f.scores = scores2.data();
  EXPECT_EQ(ops->attention_forward(f), AttentionImpl::kNative);
  EXPECT_TRUE(same_bits(ctx, ctx2));
  EXPECT_TRUE(same_bits(probs, probs2));
  if (p > 0) {
    EXPECT_TRUE(same_bits(probs_drop, probs_drop2));
  }

  std::vector<T> dp(P), ds(P), dq(NH), dk(NH), dv(NH);
  old_backward<T>(*ops, s, scale, p, key, q.data(), k.data(), v.data(), probs.data(), probs_drop.data(),
                  d_ctx.data(), dp.data(), ds.data(), dq.data(), dk.data(), dv.data());
  std::vector<T> dp2(P), ds2(P), dq2(NH), dk2(NH), dv2(NH);
  AttentionBackward<T> b;
  b.shape = s;
  b.scale = scale;
  b.dropout = p;
  b.dropout_key = key;
  b.key_mask = mask.data();
  b.q = q.data();
  b.k = k.data();
  b.v = v.data();
  b.ctx = ctx2.data();
  b.probs = probs2.data();
  b.probs_drop = f.probs_drop;
  b.d_ctx = d_ctx.data();
  b.d_q = dq2.data();
  b.d_k = dk2.data();
  b.d_v = dv2.data();
  b.d_probs = dp2.data();
  b.d_scores = ds2.data();
  ops->attention_backward(b);
  EXPECT_TRUE(same_bits(dq, dq2));
  EXPECT_TRUE(same_bits(dk, dk2));
  EXPECT_TRUE(same_bits(dv, dv2));
  // The gradients are not trivially zero (the comparison above could not pass by accident).
  double norm = 0;
  for (T x : dq2) norm += double(x) * double(x);
  EXPECT_GT(norm, 1e-6);
}

TEST(AttentionEntry, DefaultIsTheOldCompositionBitForBit) {
  check_default_is_old_composition<float>(0.0f);
  check_default_is_old_composition<float>(0.1f);
  check_default_is_old_composition<double>(0.0f);
  check_default_is_old_composition<double>(0.25f);
}

// q, k, v as the column blocks of one [B*S, 3H] tensor (qkv_ld = 3H, the model's packed
// projection output), d_q, d_k, d_v likewise: the same values as separate [B*S, H] tensors.
template <typename T>
void check_packed_qkv_equals_separate(float p) {
  auto ops = cpu::make_ops<T>();
  const AttentionShape sep{2, 3, 5, 4, 12};  // B, A, S, D, ld = A * D
  AttentionShape packed = sep;
  packed.qkv_ld = 3 * sep.ld;
  const int N = sep.batch * sep.seq, H = sep.ld;
  const size_t NH = size_t(N) * H, P = size_t(sep.batch) * sep.heads * sep.seq * sep.seq;
  const T scale = T(1) / std::sqrt(T(sep.head_dim));
  const RngKey key{5, 2, 3};
  std::vector<int32_t> mask(size_t(N), 1);
  mask[sep.seq + 4] = 0;
  const std::vector<T> q = random_values<T>(NH, 11), k = random_values<T>(NH, 12), v = random_values<T>(NH, 13),
                       d_ctx = random_values<T>(NH, 14);
  std::vector<T> qkv(3 * NH);
  for (int r = 0; r < N; ++r)
    for (int c = 0; c < H; ++c) {
      qkv[size_t(r) * 3 * H + c] = q[size_t(r) * H + c];
      qkv[size_t(r) * 3 * H + H + c] = k[size_t(r) * H + c];
      qkv[size_t(r) * 3 * H + 2 * H + c] = v[size_t(r) * H + c];
    }
  struct Out {
    std::vector<T> scores, probs, probs_drop, ctx, dp, ds, dq, dk, dv;
  };
  auto run = [&](const AttentionShape& s, const T* qp, const T* kp, const T* vp, T* dq, T* dk, T* dv) {
    Out o{std::vector<T>(P), std::vector<T>(P), std::vector<T>(P), std::vector<T>(NH), std::vector<T>(P),
          std::vector<T>(P), {}, {}, {}};
    AttentionForward<T> f;
    f.shape = s;
    f.scale = scale;
    f.dropout = p;
    f.dropout_key = key;
    f.key_mask = mask.data();
    f.q = qp;
    f.k = kp;
    f.v = vp;
    f.ctx = o.ctx.data();
    f.probs = o.probs.data();
    f.probs_drop = p > 0 ? o.probs_drop.data() : nullptr;
    f.scores = o.scores.data();
    ops->attention_forward(f);
    AttentionBackward<T> b;
    b.shape = s;
    b.scale = scale;
    b.dropout = p;
    b.dropout_key = key;
    b.key_mask = mask.data();
    b.q = qp;
    b.k = kp;
    b.v = vp;
    b.ctx = o.ctx.data();
    b.probs = o.probs.data();
    b.probs_drop = f.probs_drop;
    b.d_ctx = d_ctx.data();
    b.d_q = dq;
    b.d_k = dk;
    b.d_v = dv;
    b.d_probs = o.dp.data();
    b.d_scores = o.ds.data();
    ops->attention_backward(b);
    return o;
  };
  std::vector<T> dq(NH), dk(NH), dv(NH), d_qkv(3 * NH, T(-7));
  const Out a = run(sep, q.data(), k.data(), v.data(), dq.data(), dk.data(), dv.data());
  const Out b = run(packed, qkv.data(), qkv.data() + H, qkv.data() + 2 * H, d_qkv.data(), d_qkv.data() + H,
                    d_qkv.data() + 2 * H);
  EXPECT_TRUE(same_bits(a.ctx, b.ctx));
  EXPECT_TRUE(same_bits(a.probs, b.probs));
  std::vector<T> bq(NH), bk(NH), bv(NH);
  for (int r = 0; r < N; ++r)
    for (int c = 0; c < H; ++c) {
      bq[size_t(r) * H + c] = d_qkv[size_t(r) * 3 * H + c];
      bk[size_t(r) * H + c] = d_qkv[size_t(r) * 3 * H + H + c];
      bv[size_t(r) * H + c] = d_qkv[size_t(r) * 3 * H + 2 * H + c];
    }
  EXPECT_TRUE(same_bits(dq, bq));  // every element of d_qkv written (none left at -7)
  EXPECT_TRUE(same_bits(dk, bk));
  EXPECT_TRUE(same_bits(dv, bv));
  double norm = 0;
  for (T x : dk) norm += double(x) * double(x);
  EXPECT_GT(norm, 1e-6);
}

TEST(AttentionEntry, PackedQkvRowsEqualSeparateTensors) {
  check_packed_qkv_equals_separate<float>(0.0f);
  check_packed_qkv_equals_separate<float>(0.2f);
  check_packed_qkv_equals_separate<double>(0.2f);
}

// Forwards every op to the CPU backend and records what the model passes to the attention
// entry points; its attention claims to be "fused" (it runs the native one underneath) so
// that the round trip of AttentionImpl from forward to backward is observable.
class RecordingOps final : public Ops<float> {
 public:
  explicit RecordingOps(bool claim_fused) : inner_(cpu::make_ops<float>()), claim_fused_(claim_fused) {}
  std::vector<std::vector<int32_t>> lengths_seen;  // one per forward call; empty when null
  std::vector<AttentionImpl> impls_seen;           // one per backward call
  int forwards = 0, backwards = 0;

  AttentionImpl attention_forward(const AttentionForward<float>& a) override {
    ++forwards;
    lengths_seen.emplace_back(a.key_lengths ? std::vector<int32_t>(a.key_lengths, a.key_lengths + a.shape.batch)
                                            : std::vector<int32_t>());
    native_attention_forward<float>(*this, a);
    return claim_fused_ ? AttentionImpl::kFused : AttentionImpl::kNative;
  }
  void attention_backward(const AttentionBackward<float>& a) override {
    ++backwards;
    impls_seen.push_back(a.impl);
    native_attention_backward<float>(*this, a);
  }

  Allocator& allocator() override { return inner_->allocator(); }
  void set_gelu_form(kern::GeluForm f) override {
    Ops<float>::set_gelu_form(f);
    inner_->set_gelu_form(f);
  }
  void zero(float* p, size_t n) override { inner_->zero(p, n); }
  void gemm(Trans ta, Trans tb, int m, int n, int k, float al, const float* a, int lda, const float* b, int ldb,
            float be, float* c, int ldc) override {
    inner_->gemm(ta, tb, m, n, k, al, a, lda, b, ldb, be, c, ldc);
  }
  void gemm_batched(Trans ta, Trans tb, int m, int n, int k, float al, const float* a, int lda, const float* b,
                    int ldb, float be, float* c, int ldc, const GemmBatch& g) override {
    inner_->gemm_batched(ta, tb, m, n, k, al, a, lda, b, ldb, be, c, ldc, g);
  }
  void bias_add_forward(float* y, const float* b, int r, int c) override { inner_->bias_add_forward(y, b, r, c); }
  void bias_add_backward(const float* dy, float* db, int r, int c) override { inner_->bias_add_backward(dy, db, r, c); }
  void add_forward(const float* a, const float* b, float* y, size_t n) override { inner_->add_forward(a, b, y, n); }
  void accumulate(float* d, const float* s, size_t n) override { inner_->accumulate(d, s, n); }
  void layernorm_forward(const float* x, const float* g, const float* b, float* y, float* mean, float* rstd, int r,
                         int c, float eps) override {
    inner_->layernorm_forward(x, g, b, y, mean, rstd, r, c, eps);
  }
  void layernorm_backward(const float* dy, const float* x, const float* g, const float* mean, const float* rstd,
                          float* dx, float* dg, float* db, int r, int c) override {
    inner_->layernorm_backward(dy, x, g, mean, rstd, dx, dg, db, r, c);
  }
  void bias_gelu_forward(float* pre, const float* b, float* act, int r, int c) override {
    inner_->bias_gelu_forward(pre, b, act, r, c);
  }
  void bias_gelu_backward(const float* dact, const float* pre, float* dpre, float* db, int r, int c) override {
    inner_->bias_gelu_backward(dact, pre, dpre, db, r, c);
  }
  void bias_dropout_residual_forward(float* y, const float* b, const float* res, int r, int c, float p,
                                     RngKey k) override {
    inner_->bias_dropout_residual_forward(y, b, res, r, c, p, k);
  }
  void dropout_bias_backward(const float* dy, float* dx, float* db, int r, int c, float p, RngKey k) override {
    inner_->dropout_bias_backward(dy, dx, db, r, c, p, k);
  }
  void gelu_forward(const float* x, float* y, size_t n) override { inner_->gelu_forward(x, y, n); }
  void gelu_backward(const float* dy, const float* x, float* dx, size_t n) override { inner_->gelu_backward(dy, x, dx, n); }
  void tanh_forward(const float* x, float* y, size_t n) override { inner_->tanh_forward(x, y, n); }
  void tanh_backward(const float* dy, const float* y, float* dx, size_t n) override { inner_->tanh_backward(dy, y, dx, n); }
  void dropout_forward(const float* x, float* y, size_t n, float p, RngKey k) override {
    inner_->dropout_forward(x, y, n, p, k);
  }
  void dropout_backward(const float* dy, float* dx, size_t n, float p, RngKey k) override {
    inner_->dropout_backward(dy, dx, n, p, k);
  }
  void softmax_forward(const float* s, const int32_t* m, float* p, int b, int h, int sq, float sc) override {
    inner_->softmax_forward(s, m, p, b, h, sq, sc);
  }
  void softmax_dropout_forward(const float* s, const int32_t* m, float* p, float* pd, int b, int h, int sq,
                               float sc, float dp, RngKey k) override {
    inner_->softmax_dropout_forward(s, m, p, pd, b, h, sq, sc, dp, k);
  }
  void dropout_softmax_backward(float* dpd, const float* p, float* ds, int b, int h, int sq, float sc, float dp,
                                RngKey k) override {
    inner_->dropout_softmax_backward(dpd, p, ds, b, h, sq, sc, dp, k);
  }
  void softmax_backward(const float* dp, const float* p, float* ds, int b, int h, int sq, float sc) override {
    inner_->softmax_backward(dp, p, ds, b, h, sq, sc);
  }
  void embedding_forward(const int32_t* ids, const float* t, float* o, int n, int d, bool acc) override {
    inner_->embedding_forward(ids, t, o, n, d, acc);
  }
  void embedding_backward(const int32_t* ids, const float* dout, float* dt, int n, int d) override {
    inner_->embedding_backward(ids, dout, dt, n, d);
  }
  void gather_rows_forward(const float* s, const int32_t* i, float* d, int n, int dim) override {
    inner_->gather_rows_forward(s, i, d, n, dim);
  }
  void gather_rows_backward(const float* dd, const int32_t* i, float* ds, int n, int dim) override {
    inner_->gather_rows_backward(dd, i, ds, n, dim);
  }
  void cross_entropy_forward(const float* l, const int32_t* lab, float* loss, int32_t* c, int r, int k) override {
    inner_->cross_entropy_forward(l, lab, loss, c, r, k);
  }
  void cross_entropy_backward(const float* l, const int32_t* lab, float* dl, int r, int k, float w) override {
    inner_->cross_entropy_backward(l, lab, dl, r, k, w);
  }

 private:
  std::unique_ptr<Ops<float>> inner_;
  bool claim_fused_;
};

TEST(AttentionEntry, ModelPassesPrefixLengthsAndTheForwardsImplToTheBackward) {
  BertConfig cfg;
  ASSERT_TRUE(bert_preset("bert-tiny", &cfg).is_ok());
  RecordingOps ops(/*claim_fused=*/true);
  BertModel<float> m(cfg, ops, {4, 12, 3});
  m.init_params(3);
  // random_batch pads every other sequence by a third: lengths 12, 8, 12, 8.
  Batch b = testing::random_batch(4, 12, 3, cfg.vocab_size, 5);
  m.forward(b, {true, 1, 1});
  m.zero_grads();
  m.backward(1.0f);
  ASSERT_EQ(ops.forwards, cfg.layers);
  ASSERT_EQ(ops.backwards, cfg.layers);
  for (const auto& l : ops.lengths_seen) EXPECT_EQ(l, (std::vector<int32_t>{12, 8, 12, 8}));
  for (AttentionImpl i : ops.impls_seen) EXPECT_EQ(i, AttentionImpl::kFused);

  // A mask with a hole is not a prefix: no lengths (a fused kernel must not be used).
  b.input_mask[2 * 12 + 3] = 0;
  ops.lengths_seen.clear();
  m.forward(b, {true, 1, 2});
  for (const auto& l : ops.lengths_seen) EXPECT_TRUE(l.empty());
}

TEST(AttentionEntry, ProfilingOpsTimesTheEntryPointAndChangesNothing) {
  BertConfig cfg;
  ASSERT_TRUE(bert_preset("bert-tiny", &cfg).is_ok());
  auto cpu = cpu::make_ops<float>();
  ProfilingOps<float> prof(*cpu);
  BertModel<float> a(cfg, *cpu, {2, 16, 3}), b(cfg, prof, {2, 16, 3});
  a.init_params(9);
  b.init_params(9);
  const Batch batch = testing::random_batch(2, 16, 3, cfg.vocab_size, 4);
  const ForwardResult ra = a.forward(batch, {true, 3, 4}), rb = b.forward(batch, {true, 3, 4});
  EXPECT_EQ(ra.total_loss, rb.total_loss);
  a.zero_grads();
  b.zero_grads();
  a.backward(1.0f);
  b.backward(1.0f);
  EXPECT_EQ(0, std::memcmp(a.grads(), b.grads(), a.table().total_elements() * sizeof(float)));
  EXPECT_EQ(prof.entries().at("attention_forward").calls, cfg.layers);
  EXPECT_EQ(prof.entries().at("attention_backward").calls, cfg.layers);
}

}  // namespace
}  // namespace lansbert
