// BertModel behaviour beyond gradients: the parameter table (Hugging Face names, shapes,
// count), initialisation statistics, run-to-run determinism, the initial loss near ln(V),
// and that an eval forward ignores dropout.
#include <gtest/gtest.h>

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

// bf16 GEMMs: the model holds its weights from a forward through its backward
// (HoldSlot::kWeights), so the backward's dX GEMMs cast no weight; the bits are those of casting
// at each use, and a forward after the parameters changed casts the new ones.
TEST(BertModel, Bf16WeightsAreCastOncePerMicroStep) {
  BertConfig cfg;
  ASSERT_TRUE(bert_preset("bert-tiny", &cfg).is_ok());
  const Batch b = testing::random_batch(2, 16, 3, cfg.vocab_size, 4);
  const StepContext ctx{true, 5, 9};
  struct Run {
    double loss;
    std::vector<float> grads;
    size_t backward_casts;
  };
  auto step = [&](BertModel<float>& m, bool drop_hold) {
    const double loss = m.forward(b, ctx).total_loss;
    if (drop_hold) m.ops().release_gemm_operand(HoldSlot::kWeights);
    m.zero_grads();
    const size_t before = m.ops().gemm_operand_conversions();
    m.backward(1.0f);
    return Run{loss, std::vector<float>(m.grads(), m.grads() + m.table().total_elements()),
               m.ops().gemm_operand_conversions() - before};
  };
  auto ops_held = cpu::make_ops<float>(GemmMath::kBf16), ops_plain = cpu::make_ops<float>(GemmMath::kBf16);
  BertModel<float> held(cfg, *ops_held, {2, 16, 3}), plain(cfg, *ops_plain, {2, 16, 3});
  held.init_params(3);
  plain.init_params(3);
  const Run h = step(held, false), p = step(plain, true);
  EXPECT_EQ(h.loss, p.loss);
  EXPECT_EQ(0, std::memcmp(h.grads.data(), p.grads.data(), h.grads.size() * sizeof(float)));
  // What the held weights save in the backward: every matrix that feeds a dX GEMM, i.e. every
  // 2-D parameter but the position and token-type tables (the word table is the decoder).
  size_t dx_weights = 0;
  for (const ParamEntry& e : held.table().entries())
    if (e.shape.size() == 2 && e.name.find("position_embeddings") == std::string::npos &&
        e.name.find("token_type_embeddings") == std::string::npos)
      dx_weights += e.numel;
  EXPECT_EQ(p.backward_casts - h.backward_casts, dx_weights);
  // New parameters (as after an update): the next forward casts them again.
  held.init_params(8);
  plain.init_params(8);
  const Run h2 = step(held, false), p2 = step(plain, true);
  EXPECT_NE(h2.loss, h.loss);
  EXPECT_EQ(h2.loss, p2.loss);
  EXPECT_EQ(0, std::memcmp(h2.grads.data(), p2.grads.data(), h2.grads.size() * sizeof(float)));
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
