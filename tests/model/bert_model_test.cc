// BertModel behaviour beyond gradients: the parameter table (Hugging Face names, shapes,
// count), initialisation statistics, run-to-run determinism, the initial loss near ln(V),
// and that an eval forward ignores dropout.
#include <gtest/gtest.h>
#include <omp.h>

#include <cmath>
#include <cstring>

#include "lansbert/backend/cpu_ops.h"
#include "lansbert/model/bert_model.h"
#include "model_test_util.h"

namespace lansbert {
namespace {

TEST(ParamTable, BertBaseMatchesHuggingFaceBertForPreTraining) {
  BertConfig cfg;
  ASSERT_TRUE(bert_preset("bert-base", &cfg).is_ok());
  ParamTable t = make_bert_param_table(cfg);
  // BertForPreTraining(bert-base-uncased) has 110,106,428 parameters with the decoder tied.
  EXPECT_EQ(t.parameter_count(), 110106428u);
  const ParamEntry* q = t.find("bert.encoder.layer.11.attention.self.query.weight");
  ASSERT_NE(q, nullptr);
  EXPECT_EQ(q->shape, (std::vector<int64_t>{768, 768}));
  const ParamEntry* inter = t.find("bert.encoder.layer.0.intermediate.dense.weight");
  ASSERT_NE(inter, nullptr);
  EXPECT_EQ(inter->shape, (std::vector<int64_t>{3072, 768}));
  EXPECT_EQ(t.find("cls.predictions.decoder.weight"), nullptr);  // tied to the word embeddings
  // Every entry starts aligned except the key's and the value's, which follow the query's
  // without a gap so that the three are one [3H, H] weight and one [3H] bias.
  for (const ParamEntry& e : t.entries()) {
    const bool packed = e.name.find(".attention.self.key.") != std::string::npos ||
                        e.name.find(".attention.self.value.") != std::string::npos;
    if (!packed) {
      EXPECT_EQ(e.offset % ParamTable::kAlign, 0u) << e.name;
      continue;
    }
    const ParamEntry& prev = *(&e - 1);
    EXPECT_EQ(e.offset, prev.offset + prev.numel) << e.name << " after " << prev.name;
    EXPECT_EQ(e.shape, prev.shape) << e.name;
  }
  EXPECT_EQ(t.find("cls.predictions.bias")->role, ParamRole::kBias);
  EXPECT_EQ(t.find("bert.embeddings.LayerNorm.weight")->role, ParamRole::kLayerNormGamma);
}

TEST(ParamTable, PackedEntriesFollowWithoutGaps) {
  ParamTable t;
  t.add("a", {3}, ParamRole::kBias);
  t.add("b", {5}, ParamRole::kWeight);
  t.add_packed("c", {2, 5}, ParamRole::kWeight);
  t.add("d", {1}, ParamRole::kBias);
  EXPECT_EQ(t.find("b")->offset, ParamTable::kAlign);
  EXPECT_EQ(t.find("c")->offset, ParamTable::kAlign + 5);
  EXPECT_EQ(t.find("d")->offset, 2 * ParamTable::kAlign);
  EXPECT_EQ(t.total_elements(), 2 * ParamTable::kAlign + 1);
  EXPECT_EQ(t.parameter_count(), 3u + 5 + 10 + 1);
}

TEST(BertConfig, PresetsAndValidation) {
  BertConfig c;
  EXPECT_TRUE(bert_preset("bert-mini", &c).is_ok());
  EXPECT_EQ(c.layers, 4);
  EXPECT_EQ(c.hidden, 256);
  Status s = bert_preset("bert-huge", &c);
  EXPECT_FALSE(s.is_ok());
  EXPECT_NE(s.message().find("bert-huge"), std::string::npos);
  c.heads = 7;
  s = c.validate();
  EXPECT_FALSE(s.is_ok());
  EXPECT_NE(s.message().find("model.heads"), std::string::npos);
}

TEST(BertModel, InitialisationStatistics) {
  BertConfig cfg;
  ASSERT_TRUE(bert_preset("bert-tiny", &cfg).is_ok());
  auto ops = cpu::make_ops<float>();
  BertModel<float> m(cfg, *ops, {2, 8, 2});
  m.init_params(3);
  const ParamEntry* w = m.table().find("bert.encoder.layer.1.intermediate.dense.weight");
  double s = 0, s2 = 0;
  for (size_t i = 0; i < w->numel; ++i) {
    s += m.param(*w)[i];
    s2 += double(m.param(*w)[i]) * m.param(*w)[i];
  }
  const double mean = s / w->numel, sd = std::sqrt(s2 / w->numel - mean * mean);
  EXPECT_NEAR(mean, 0.0, 0.001);
  EXPECT_NEAR(sd, 0.02, 0.0005);
  EXPECT_EQ(m.param(*m.table().find("bert.encoder.layer.0.output.LayerNorm.weight"))[5], 1.0f);
  EXPECT_EQ(m.param(*m.table().find("bert.pooler.dense.bias"))[5], 0.0f);
  EXPECT_EQ(m.param(*m.table().find("bert.embeddings.word_embeddings.weight"))[3], 0.0f);  // [PAD] row
}

// init_params draws each element from its own Philox counter, so the threads that share the
// work change nothing: the same bits on one thread and on four.
TEST(BertModel, InitialisationIsTheSameOnAnyThreadCount) {
  BertConfig cfg;
  ASSERT_TRUE(bert_preset("bert-tiny", &cfg).is_ok());
  auto ops = cpu::make_ops<float>();
  BertModel<float> one(cfg, *ops, {1, 8, 1}), four(cfg, *ops, {1, 8, 1});
  const int threads = omp_get_max_threads();
  omp_set_num_threads(1);
  one.init_params(17);
  omp_set_num_threads(4);
  four.init_params(17);
  omp_set_num_threads(threads);
  EXPECT_EQ(0, std::memcmp(one.params(), four.params(), one.table().total_elements() * sizeof(float)));
}

TEST(BertModel, ForwardIsDeterministicAndStartsNearLnVocab) {
  BertConfig cfg;
  ASSERT_TRUE(bert_preset("bert-tiny", &cfg).is_ok());
  auto ops = cpu::make_ops<float>();
  BertModel<float> m(cfg, *ops, {4, 32, 5});
  m.init_params(11);
  const Batch b = testing::random_batch(4, 32, 5, cfg.vocab_size, 2);
  const StepContext ctx{true, 5, 9};
  ForwardResult r1 = m.forward(b, ctx);
  std::vector<float> g1;
  m.zero_grads();
  m.backward(1.0f);
  g1.assign(m.grads(), m.grads() + m.table().total_elements());
  ForwardResult r2 = m.forward(b, ctx);
  m.zero_grads();
  m.backward(1.0f);
  EXPECT_EQ(r1.total_loss, r2.total_loss);
  EXPECT_EQ(0, std::memcmp(g1.data(), m.grads(), g1.size() * sizeof(float)));
  // An untrained model predicts near-uniformly: MLM loss ~ ln(30522) = 10.33, NSP ~ ln 2.
  EXPECT_NEAR(r1.mlm_loss, std::log(30522.0), 0.3);
  EXPECT_NEAR(r1.nsp_loss, std::log(2.0), 0.2);
  EXPECT_EQ(r1.mlm_count, 4 * 5 - 1);
  EXPECT_EQ(r1.nsp_count, 4);
}

// bf16 GEMMs with cast reuse (Ops::keep_gemm_operand) against every GEMM rounding its own
// operands: the same loss and gradient bits, and exactly the casts the reuse promises to save
// (counted from the shapes below); and after new parameters (as after an update) the next
// forward casts the new ones.
TEST(BertModel, Bf16CastReuseSavesExactlyTheRepeatedCasts) {
  BertConfig cfg;
  ASSERT_TRUE(bert_preset("bert-tiny", &cfg).is_ok());
  const int B = 2, S = 16, P = 3;
  const Batch b = testing::random_batch(B, S, P, cfg.vocab_size, 4);
  const StepContext ctx{true, 5, 9};
  struct Run {
    double loss;
    std::vector<float> grads;
    size_t casts, copy_writes;
  };
  auto step = [&](BertModel<float>& m) {
    const size_t before = m.ops().gemm_operand_conversions(), writes = m.ops().gemm_operand_copy_writes();
    const double loss = m.forward(b, ctx).total_loss;
    m.zero_grads();
    m.backward(1.0f);
    return Run{loss, std::vector<float>(m.grads(), m.grads() + m.table().total_elements()),
               m.ops().gemm_operand_conversions() - before, m.ops().gemm_operand_copy_writes() - writes};
  };
  auto ops_reuse = cpu::make_ops<float>(GemmMath::kBf16), ops_plain = cpu::make_ops<float>(GemmMath::kBf16, false);
  BertModel<float> reuse(cfg, *ops_reuse, {B, S, P}), plain(cfg, *ops_plain, {B, S, P});
  reuse.init_params(3);
  plain.init_params(3);
  const Run r = step(reuse), p = step(plain);
  EXPECT_EQ(r.loss, p.loss);
  EXPECT_EQ(0, std::memcmp(r.grads.data(), p.grads.data(), r.grads.size() * sizeof(float)));
  // Weights: each matrix that feeds a forward GEMM and a dX GEMM (every 2-D parameter but the
  // position and token-type tables; the word table is the decoder) was cast twice, against
  // one cast of the whole parameter buffer.
  const ParamTable& t = reuse.table();
  size_t matrices = 0;
  for (const ParamEntry& e : t.entries())
    if (e.shape.size() == 2 && e.name.find("position_embeddings") == std::string::npos &&
        e.name.find("token_type_embeddings") == std::string::npos)
      matrices += e.numel;
  const size_t N = size_t(B) * S, H = cfg.hidden, I = cfg.intermediate, L = cfg.layers, Pt = size_t(B) * P;
  // Per layer, what reuse saves. Inputs read by a forward GEMM and its dW GEMM: x and ctx
  // (N x H) are cast once instead of twice; h1 (N x H), the GELU output (N x I) and x (the
  // previous layer's output, or the embeddings' dropout output for the first layer: the L N H
  // term below) come from their producing ops with their 16-bit copies (the *_kept ops): never
  // cast. Output
  // gradients read by a dX and a dW GEMM: q/k/v's (3NH) and d(ctx) (NH) cast once instead of
  // twice; those of the attention output, FFN input and FFN output (NH, NI, NH) come with
  // their copies: never cast. Attention: q, k, v are head slices of the packed [N, 3H]
  // tensor, so each GEMM that reads one casts its whole extent, 3NH - 2H (three times in the
  // forward, three in the backward), against one cast of 3NH kept. d(scores) and the
  // dropped-out probabilities (B A S^2 each, each read by two GEMMs) are never cast either.
  // And the GEMM outputs only GEMMs read (the *_kept GEMMs: q/k/v, ctx and d(ctx), 5NH) and
  // the q/k/v gradient (3NH, its copy written by the bias-gradient sums), which the terms
  // above count as cast once, are never cast.
  const size_t BASS = size_t(B) * cfg.heads * S * S;
  ASSERT_GT(cfg.attention_dropout, 0.f) << "the count assumes the dropped-out probabilities";
  const size_t per_layer = N * (2 * H + 2 * H + 2 * I) + (3 * N * H + 2 * N * H + 2 * N * I + 2 * N * H) + N * H +
                           2 * BASS + (6 * (3 * N * H - 2 * H) - 3 * N * H) + 2 * BASS + 5 * N * H + 3 * N * H;
  // Heads: the output gradients of the decoder (Pt x V), the MLM transform (Pt x H), the NSP
  // classifier (B x 2) and the pooler (B x H); those of the three with a bias in the GEMM's
  // place (not the transform's, whose bias is fused into its GELU) are not cast at all: their
  // bias-gradient sums write their copies.
  const size_t with_bias = Pt * cfg.vocab_size + size_t(B) * 2 + size_t(B) * H;
  const size_t heads = with_bias + Pt * H + with_bias;
  EXPECT_EQ(p.casts - r.casts, 2 * matrices - t.total_elements() + L * per_layer + L * N * H + heads);
  // The copies the producing ops wrote instead, per layer: P, d(scores), the GELU output, h1,
  // the three output gradients, q/k/v, ctx, d(ctx) and d(q/k/v); each layer's input (the
  // embeddings' output and the outputs of all layers but the last); the heads' output
  // gradients with a bias.
  EXPECT_EQ(r.copy_writes, L * (2 * BASS + 2 * N * I + 3 * N * H + 5 * N * H + 3 * N * H) + L * N * H + with_bias);
  EXPECT_EQ(p.copy_writes, 0u);
  // With reuse the dropped-out probabilities, the GELU output, q/k/v and ctx have no fp32
  // memory of their own (their addresses key the kept copies: the first two share their
  // producers' addresses, the others are addresses only), and the estimate for plans says so.
  EXPECT_TRUE(ops_reuse->kept_outputs_unwritten());
  EXPECT_FALSE(ops_plain->kept_outputs_unwritten());
  const size_t saved = plain.activation_bytes() - reuse.activation_bytes();
  const size_t unbacked = L * (BASS + N * I + 4 * N * H) * sizeof(float);
  EXPECT_GE(saved, unbacked);
  EXPECT_LT(saved, unbacked + L * 4 * 256);  // the arena's alignment
  EXPECT_EQ(reuse.activation_bytes(), BertModel<float>::activation_bytes_for(cfg, {B, S, P}, OutputStorage::of(*ops_reuse, cfg)));
  EXPECT_EQ(plain.activation_bytes(), BertModel<float>::activation_bytes_for(cfg, {B, S, P}, OutputStorage::of(*ops_plain, cfg)));
  // New parameters: the next forward keeps (and casts) them again.
  reuse.init_params(8);
  plain.init_params(8);
  const Run r2 = step(reuse), p2 = step(plain);
  EXPECT_NE(r2.loss, r.loss);
  EXPECT_EQ(r2.loss, p2.loss);
  EXPECT_EQ(0, std::memcmp(r2.grads.data(), p2.grads.data(), r2.grads.size() * sizeof(float)));
}

// The weight copy (what the optimizer writes in its update, filled by hand here): while it is
// current, a forward reads the weights from it and casts one parameter buffer less, with the
// same loss and gradients; after init_params (or before the copy is said to be current) the
// weights are cast again.
TEST(BertModel, CurrentWeightCopyReplacesTheWeightCast) {
  BertConfig cfg;
  ASSERT_TRUE(bert_preset("bert-tiny", &cfg).is_ok());
  const int B = 2, S = 16, P = 3;
  const Batch b = testing::random_batch(B, S, P, cfg.vocab_size, 6);
  for (GemmMath math : {GemmMath::kBf16, GemmMath::kFp16}) {
    auto ops_copy = cpu::make_ops<float>(math), ops_cast = cpu::make_ops<float>(math);
    BertModel<float> with(cfg, *ops_copy, {B, S, P}), without(cfg, *ops_cast, {B, S, P});
    const size_t n = with.table().total_elements();
    auto step = [&](BertModel<float>& m, uint32_t key, double* loss) {
      const size_t before = m.ops().gemm_operand_conversions();
      *loss = m.forward(b, StepContext{true, 5, key}).total_loss;
      m.zero_grads();
      m.backward(1.0f);
      return m.ops().gemm_operand_conversions() - before;
    };
    auto same_grads = [&] { return std::memcmp(with.grads(), without.grads(), n * sizeof(float)) == 0; };
    with.init_params(3);
    without.init_params(3);
    with.enable_weight_copy(gemm_half_format(math));
    ASSERT_NE(with.weight_copy(), nullptr);
    double lw = 0, lo = 0;
    // Not current yet: cast as before.
    EXPECT_EQ(step(with, 1, &lw), step(without, 1, &lo));
    // An "update": new weights and their copy.
    for (size_t i = 0; i < n; ++i) {
      const float p = with.params()[i] * 0.97f + 1e-3f;
      with.params()[i] = without.params()[i] = p;
      with.weight_copy()[i] = kern::float_to_half(p, gemm_half_format(math));
    }
    with.set_weight_copy_current(true);
    const size_t c_with = step(with, 2, &lw), c_without = step(without, 2, &lo);
    EXPECT_EQ(c_without - c_with, n) << gemm_math_name(math);
    EXPECT_EQ(lw, lo);
    EXPECT_TRUE(same_grads());
    // It is the copy that is read: a stale copy changes the loss.
    for (size_t i = 0; i < n; ++i) with.params()[i] = without.params()[i] = with.params()[i] * 1.5f;
    step(with, 3, &lw);
    step(without, 3, &lo);
    EXPECT_NE(lw, lo) << "the stale copy was not read";
    // init_params: the copy is no longer current.
    with.init_params(8);
    without.init_params(8);
    EXPECT_EQ(step(with, 4, &lw), step(without, 4, &lo));
    EXPECT_EQ(lw, lo);
    EXPECT_TRUE(same_grads());
  }
}

TEST(BertModel, GradReadyHookCoversEveryEntryOnceInBackwardOrder) {
  BertConfig cfg;
  ASSERT_TRUE(bert_preset("bert-tiny", &cfg).is_ok());
  auto ops = cpu::make_ops<float>();
  BertModel<float> m(cfg, *ops, {2, 8, 2});
  m.init_params(1);
  const Batch b = testing::random_batch(2, 8, 2, cfg.vocab_size, 2);
  m.forward(b, {true, 1, 1});
  m.zero_grads();
  std::vector<int> seen(m.table().size(), 0);
  std::vector<size_t> firsts;
  m.backward(1.0f, [&](size_t first, size_t end) {
    firsts.push_back(first);
    for (size_t i = first; i < end; ++i) ++seen[i];
  });
  for (size_t i = 0; i < seen.size(); ++i) EXPECT_EQ(seen[i], 1) << m.table()[i].name;
  ASSERT_EQ(firsts.size(), size_t(cfg.layers) + 2);
  EXPECT_EQ(m.table()[firsts.front()].name, "bert.pooler.dense.weight");
  EXPECT_EQ(m.table()[firsts[1]].name, "bert.encoder.layer.1.attention.self.query.weight");
  EXPECT_EQ(firsts.back(), 0u);
}

TEST(BertModel, EvalForwardIgnoresDropoutStream) {
  BertConfig cfg;
  ASSERT_TRUE(bert_preset("bert-tiny", &cfg).is_ok());
  auto ops = cpu::make_ops<float>();
  BertModel<float> m(cfg, *ops, {2, 16, 3});
  m.init_params(11);
  const Batch b = testing::random_batch(2, 16, 3, cfg.vocab_size, 2);
  EXPECT_EQ(m.forward(b, {false, 1, 1}).total_loss, m.forward(b, {false, 2, 7}).total_loss);
  EXPECT_NE(m.forward(b, {true, 1, 1}).total_loss, m.forward(b, {true, 1, 2}).total_loss);
}

}  // namespace
}  // namespace lansbert
