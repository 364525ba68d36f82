// The gradient noise scale's estimator and the gradient sum of squares it starts from: the
// estimates recover |G|² and tr(Σ) exactly from their expectations, converge on noisy batch
// means drawn from a known distribution, and the sum of squares equals a plain double loop.
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <vector>

#include "lansbert/model/bert_config.h"
#include "lansbert/model/bert_model.h"
#include "lansbert/optim/noise_scale.h"

namespace lansbert {
namespace {

// E|G_b|² = |G|² + tr(Σ)/b: given exactly these, the estimates are |G|² and tr(Σ).
TEST(NoiseScale, RecoversTheTermsFromTheirExpectations) {
  const double grad_sq = 4, trace = 100, b = 8, B = 64;
  const NoiseScaleEstimate e = estimate_noise_scale(grad_sq + trace / b, grad_sq + trace / B, b, B);
  EXPECT_NEAR(e.grad_sq, 4, 1e-12);
  EXPECT_NEAR(e.trace, 100, 1e-10);
  EXPECT_NEAR(e.scale, 25, 1e-10);
  // No noise: both batch sizes see |G|² alone.
  const NoiseScaleEstimate quiet = estimate_noise_scale(3, 3, 16, 512);
  EXPECT_EQ(quiet.trace, 0);
  EXPECT_EQ(quiet.scale, 0);
  // Noise that swamps the signal can make the |G|² estimate negative: no scale then.
  EXPECT_TRUE(std::isnan(estimate_noise_scale(10, 0.1, 8, 64).scale));
}

// Per-sample gradients g_i = G + noise (independent coordinates of variance s², so tr(Σ) =
// d s²), batch means over b and B samples (B holding the b ones, as an update holds its first
// micro-batch), averaged over many steps: the estimates approach |G|² and d s².
TEST(NoiseScale, ConvergesOnBatchMeansOfKnownNoise) {
  const int d = 32, b = 4, B = 32, steps = 4000;
  const double s = 0.5;
  std::vector<double> G(d);
  for (int j = 0; j < d; ++j) G[j] = 0.1 * std::sin(j + 1.0);
  double grad_sq = 0;
  for (double x : G) grad_sq += x * x;
  std::mt19937_64 rng(3);
  std::normal_distribution<double> noise(0, s);
  double small_sum = 0, big_sum = 0;
  std::vector<double> small(d), big(d);
  for (int t = 0; t < steps; ++t) {
    std::fill(small.begin(), small.end(), 0.0);
    std::fill(big.begin(), big.end(), 0.0);
    for (int i = 0; i < B; ++i)
      for (int j = 0; j < d; ++j) {
        const double g = G[j] + noise(rng);
        if (i < b) small[j] += g / b;
        big[j] += g / B;
      }
    for (int j = 0; j < d; ++j) small_sum += small[j] * small[j], big_sum += big[j] * big[j];
  }
  const NoiseScaleEstimate e = estimate_noise_scale(small_sum / steps, big_sum / steps, b, B);
  const double trace = d * s * s;
  EXPECT_NEAR(e.trace, trace, 0.05 * trace);
  EXPECT_NEAR(e.grad_sq, grad_sq, 0.1);  // |G|² = 0.16: its estimate's spread is about 0.03 here
  EXPECT_GT(e.scale, 0);
}

TEST(NoiseScale, GradientSumOfSquaresIsThePlainSum) {
  BertConfig cfg;
  ASSERT_TRUE(bert_preset("bert-tiny", &cfg).is_ok());
  const ParamTable table = make_bert_param_table(cfg);
  // The blocks' elements; the alignment gaps between them hold no gradient and are not summed
  // (a value there shows up as a difference).
  std::vector<float> g(table.total_elements(), 1e3f);
  std::mt19937 rng(5);
  std::normal_distribution<float> draw(0, 0.01f);
  double want = 0;
  for (size_t b = 0; b < table.size(); ++b)
    for (size_t i = table[b].offset; i < table[b].offset + table[b].numel; ++i) {
      g[i] = draw(rng);
      want += double(g[i]) * g[i];
    }
  const double got = gradient_sum_squares(table, g.data());
  EXPECT_NEAR(got, want, 1e-12 * want);
  EXPECT_EQ(gradient_sum_squares(table, g.data()), got);  // the same sum each call
}

}  // namespace
}  // namespace lansbert
