// The whole bert-tiny model's gradient of the total pretraining loss (MLM + NSP) with respect
// to every parameter tensor, at sampled elements, against fp64 central differences.
// Dropout masks are a pure function of (seed, step, site, element), so the check also holds
// with dropout on: the same StepContext draws the same masks in every forward.
#include <gtest/gtest.h>

#include <cmath>
#include <random>

#include "fd.h"
#include "lansbert/backend/cpu_ops.h"
#include "lansbert/model/bert_model.h"
#include "model_test_util.h"

namespace lansbert {
namespace {

constexpr int kB = 2, kS = 12, kP = 3;

// Every tensor's gradient, or (only non-empty) those whose names contain it.
void check_all_tensors(float dropout, kern::GeluForm gelu = kern::GeluForm::kErf, const std::string& only = "") {
  BertConfig cfg;
  ASSERT_TRUE(bert_preset("bert-tiny", &cfg).is_ok());
  cfg.hidden_dropout = cfg.attention_dropout = dropout;
  cfg.hidden_act = gelu;
  // A wider initialisation than BERT's 0.02 gives attention that is far from uniform, so the
  // query/key gradients are large enough to compare tightly.
  cfg.init_std = 0.1f;
  auto ops = cpu::make_ops<double>();
  BertModel<double> model(cfg, *ops, {kB, kS, kP});
  model.init_params(17);
  // Move biases and LayerNorm parameters off their special initial values (0 and 1).
  std::mt19937 g(5);
  std::uniform_real_distribution<double> u(-0.1, 0.1);
  for (const ParamEntry& e : model.table().entries())
    if (e.role != ParamRole::kWeight && e.role != ParamRole::kEmbedding)
      for (size_t i = 0; i < e.numel; ++i) model.param(e)[i] += u(g);

  const Batch batch = testing::random_batch(kB, kS, kP, cfg.vocab_size, 3);
  const StepContext ctx{dropout > 0, 99, 4};
  model.zero_grads();
  model.forward(batch, ctx);
  model.backward(1.0);
  auto loss = [&] { return model.forward(batch, ctx).total_loss; };

  int checked = 0;
  for (const ParamEntry& e : model.table().entries()) {
    if (!only.empty() && e.name.find(only) == std::string::npos) continue;
    ++checked;
    // Sample 3 elements; position rows past S never get a gradient, so stay inside them.
    const size_t span = e.name.find("position_embeddings") != std::string::npos ? size_t(kS) * cfg.hidden : e.numel;
    std::vector<double> analytic, numeric;
    for (size_t i = 0; i < 3; ++i) {
      const size_t k = (i * 7919 + e.offset * 31 + 13) % span;
      analytic.push_back(model.grad(e)[k]);
      numeric.push_back(testing::central_difference5(model.param(e) + k, loss, 1e-3));
    }
    double numeric_norm = 0, analytic_max = 0;
    for (size_t i = 0; i < numeric.size(); ++i) {
      numeric_norm += numeric[i] * numeric[i];
      analytic_max = std::max(analytic_max, std::abs(analytic[i]));
    }
    if (std::sqrt(numeric_norm) < 1e-9) {
      // A gradient that is zero in exact arithmetic (the key bias: softmax ignores a constant
      // added to a whole row of scores): only rounding noise may remain on either side.
      EXPECT_LT(analytic_max, 1e-14) << e.name;
      // No other tensor may pass by this branch: its sampled gradient must not all be zero.
      EXPECT_NE(e.name.find("attention.self.key.bias"), std::string::npos)
          << e.name << ": a zero finite difference where only the key bias has one";
      continue;
    }
    const double err = testing::relative_error(analytic, numeric);
    EXPECT_LT(err, 1e-6) << e.name << " analytic " << analytic[0] << " numeric " << numeric[0];
  }
  EXPECT_GE(checked, only.empty() ? 10 : 2) << "tensors named '" << only << "'";
}

TEST(BertGradient, EveryTensorMatchesFiniteDifferencesWithoutDropout) { check_all_tensors(0.0f); }

TEST(BertGradient, EveryTensorMatchesFiniteDifferencesWithDropout) { check_all_tensors(0.1f); }

// model.hidden_act: gelu_tanh, in the FFN and the MLM transform: the tensors whose gradients
// pass through gelu' first (the FFN's first layer of each encoder layer, the MLM transform's
// dense layer; the rest is the erf tests' path).
TEST(BertGradient, GeluInputTensorsMatchFiniteDifferencesWithTanhGelu) {
  check_all_tensors(0.0f, kern::GeluForm::kTanh, ".intermediate.");
  check_all_tensors(0.0f, kern::GeluForm::kTanh, "transform.dense");
}

// The form reaches the model's loss: the same parameters and batch give another loss.
TEST(BertGradient, TanhGeluChangesTheLoss) {
  BertConfig cfg;
  ASSERT_TRUE(bert_preset("bert-tiny", &cfg).is_ok());
  cfg.hidden_dropout = cfg.attention_dropout = 0;
  cfg.init_std = 0.5f;  // pre-activations of a few units, where the two forms differ by ~1e-4
  auto ops = cpu::make_ops<double>();
  const Batch batch = testing::random_batch(kB, kS, kP, cfg.vocab_size, 3);
  double loss[2];
  for (kern::GeluForm f : {kern::GeluForm::kErf, kern::GeluForm::kTanh}) {
    cfg.hidden_act = f;
    BertModel<double> model(cfg, *ops, {kB, kS, kP});
    model.init_params(17);
    loss[int(f)] = model.forward(batch, {false, 99, 4}).total_loss;
  }
  EXPECT_GT(std::abs(loss[0] - loss[1]), 1e-7 * std::abs(loss[0]));
  EXPECT_LT(std::abs(loss[0] - loss[1]), 1e-2 * std::abs(loss[0]));
}

TEST(BertGradient, LossWeightScalesGradientLinearly) {
  BertConfig cfg;
  ASSERT_TRUE(bert_preset("bert-tiny", &cfg).is_ok());
  auto ops = cpu::make_ops<double>();
  BertModel<double> model(cfg, *ops, {kB, kS, kP});
  model.init_params(1);
  const Batch batch = testing::random_batch(kB, kS, kP, cfg.vocab_size, 8);
  model.zero_grads();
  model.forward(batch, {true, 1, 1});
  model.backward(1.0);
  std::vector<double> g1(model.grads(), model.grads() + model.table().total_elements());
  // A second backward with weight 0.5 adds half again: gradients accumulate (+=).
  model.backward(0.5);
  for (size_t i = 0; i < g1.size(); i += 97) EXPECT_NEAR(model.grads()[i], 1.5 * g1[i], 1e-12 + 1e-12 * std::abs(g1[i]));
}

}  // namespace
}  // namespace lansbert
