// LANS against numbers derived from the formulas (OPTIMIZERS.md, LANS steps 1-7) in double,
// plus the properties the paper's method promises: a zero-initialised bias first moves by a
// plain lr-sized step, an all-zero gradient block stays finite, excluded blocks get no decay
// but still get trust ratios, and the update is invariant to scaling every gradient by c > 0.
#include <gtest/gtest.h>

#include <cmath>
#include <memory>

#include "optim_test_util.h"

namespace lansbert {
namespace {

using testing::Flat;
using testing::RefBlock;

// eps 1e-2, not the default 1e-6: on blocks of 3-6 elements (normalised gradients of 0.3-0.9)
// 1e-6 hides where eps sits and whether the configured value is used; 1e-2 shows both.
constexpr double kB1 = 0.9, kB2 = 0.999, kEps = 1e-2, kWd = 0.01, kLr = 0.05;

std::unique_ptr<Optimizer> lans(double eps = kEps) {
  OptimizerConfig c;
  c.weight_decay = kWd;
  c.eps = eps;
  std::unique_ptr<Optimizer> o;
  EXPECT_TRUE(make_optimizer("lans", c, &o).is_ok());
  return o;
}

// Three updates on w [2,3] (wd 0.01), a zero-initialised bias b [3] and gamma [4] (both
// excluded, wd 0). Step 3 gives gamma an all-zero gradient. The expected values come from
// ref_lans (optim_test_util.h), a direct double transcription of:
//   gh = g/(||g||+eps) (g if ||g|| = 0); m = b1 m + (1-b1) gh; v = b2 v + (1-b2) gh^2;
//   d = sqrt(v/(1-b2^t)) + eps; u_m = m/(1-b1^t)/d + wd p; u_g = gh/d + wd p;
//   r = ||p||/||u|| (1 if a norm is 0); p -= lr b1 r_m u_m + lr (1-b1) r_g u_g.
TEST(Lans, MatchesFormulaOverThreeSteps) {
  const ParamTable t = testing::small_table();
  Flat f(t);
  std::vector<RefBlock> ref(3);
  ref[0].p = {0.5, -0.3, 0.2, 0.1, -0.4, 0.6};
  ref[0].wd = kWd;
  ref[1].p = {0, 0, 0};
  ref[2].p = {1, 1, 1, 1};
  for (size_t b = 0; b < 3; ++b) {
    ref[b].m.assign(ref[b].p.size(), 0);
    ref[b].v.assign(ref[b].p.size(), 0);
    testing::set_block(t, b, &f.p, ref[b].p);
  }
  const std::vector<std::vector<std::vector<double>>> grads = {
      {{0.1, -0.2, 0.3, 0.05, -0.1, 0.2}, {0.5, -0.25, 1.0}, {0.01, -0.02, 0.03, 0.0}},
      {{-0.3, 0.1, 0.0, 0.2, 0.4, -0.1}, {0.2, 0.2, -0.1}, {0.5, 0.1, -0.2, 0.3}},
      {{0.05, 0.05, -0.2, 0.1, 0.0, 0.3}, {-0.4, 0.1, 0.3}, {0.0, 0.0, 0.0, 0.0}},
  };
  auto opt = lans();
  for (int step = 1; step <= 3; ++step) {
    for (size_t b = 0; b < 3; ++b) {
      testing::set_block(t, b, &f.g, grads[step - 1][b]);
      testing::ref_lans(&ref[b], grads[step - 1][b], step, kLr, kB1, kB2, kEps);
    }
    UpdateStats stats;
    opt->update(t, f.buffers(), step, kLr, &stats);
    for (size_t b = 0; b < 3; ++b) testing::expect_block_near(t, b, f, ref[b], 2e-5);
    // The trust ratios it reports are the ones it applied (the bias's first is 1: ||p|| = 0).
    testing::expect_ratios_near(stats.trust_ratio, ref, /*grad=*/false, 1e-5);
    testing::expect_ratios_near(stats.trust_ratio_grad, ref, /*grad=*/true, 1e-5);
    if (step == 1) {
      EXPECT_EQ(stats.trust_ratio[1], 1.0);
    }
  }
  for (float x : f.p) EXPECT_TRUE(std::isfinite(x));
}

// At t = 1 from p = 0: m/(1-b1) = gh, v/(1-b2) = gh^2, so d = |gh| + eps and
// u_m = u_g = gh/(|gh|+eps); ||p|| = 0 makes both ratios 1, so
// p = -lr (b1 + 1 - b1) gh/(|gh|+eps) = -lr gh/(|gh|+eps): a plain lr-sized step.
// At t = 2 the step is proportional to the bias's own norm: ||dp|| <= lr ||p|| (b1 + 1 - b1)
// (each term has norm lr*b*||p|| and they add by the triangle inequality).
TEST(Lans, ZeroBiasFirstMovesByLrThenByItsNorm) {
  const ParamTable t = testing::small_table();
  Flat f(t);
  const std::vector<double> g = {0.5, -0.25, 1.0};
  testing::set_block(t, 1, &f.g, g);
  auto opt = lans();
  opt->update(t, f.buffers(), 1, kLr, nullptr);
  const double gn = testing::norm(g);
  for (size_t i = 0; i < 3; ++i) {
    const double gh = g[i] / (gn + kEps);
    EXPECT_NEAR(f.p[t[1].offset + i], -kLr * gh / (std::fabs(gh) + kEps), 1e-8);
  }
  std::vector<double> before(3), delta(3);
  for (size_t i = 0; i < 3; ++i) before[i] = f.p[t[1].offset + i];
  opt->update(t, f.buffers(), 2, kLr, nullptr);
  for (size_t i = 0; i < 3; ++i) delta[i] = f.p[t[1].offset + i] - before[i];
  EXPECT_LE(testing::norm(delta), kLr * testing::norm(before) * (1 + 1e-6));
  EXPECT_GT(testing::norm(delta), 0.5 * kLr * testing::norm(before));
}

// gn = 0: gh = g = 0, so m, v decay; with wd = 0 (gamma) u = 0, the ratio falls back to 1
// and the block does not move; with wd > 0 (w) u = wd p, r = 1/wd and the weight shrinks by
// exactly lr (times b1 + 1 - b1 = 1): p -> (1 - lr) p. Everything stays finite.
TEST(Lans, AllZeroGradientBlockStaysFinite) {
  const ParamTable t = testing::small_table();
  Flat f(t);
  testing::set_block(t, 0, &f.p, {0.5, -0.3, 0.2, 0.1, -0.4, 0.6});
  testing::set_block(t, 2, &f.p, {1, 2, 3, 4});
  testing::set_block(t, 1, &f.g, {0.5, -0.25, 1.0});  // only the bias has a gradient
  auto opt = lans();
  opt->update(t, f.buffers(), 1, kLr, nullptr);
  for (float x : f.p) EXPECT_TRUE(std::isfinite(x));
  for (float x : f.m) EXPECT_TRUE(std::isfinite(x));
  for (size_t i = 0; i < 4; ++i) EXPECT_EQ(f.p[t[2].offset + i], static_cast<float>(i + 1));
  const std::vector<double> w = {0.5, -0.3, 0.2, 0.1, -0.4, 0.6};
  for (size_t i = 0; i < 6; ++i) EXPECT_NEAR(f.p[t[0].offset + i], (1 - kLr) * w[i], 5e-7);
}

// A nonzero bias with wd 0.5 configured: it is excluded, so a zero gradient leaves it
// untouched (no decay), while at t = 1 a nonzero gradient moves it by exactly lr*||p|| in norm
// (u_m = u_g = gh/(|gh|+eps), both scaled by r = ||p||/||u||): the trust ratio applies.
TEST(Lans, ExcludedBlocksNoDecayButTrustRatio) {
  const ParamTable t = testing::small_table();
  OptimizerConfig c;
  c.weight_decay = 0.5;
  std::unique_ptr<Optimizer> opt;
  ASSERT_TRUE(make_optimizer("lans", c, &opt).is_ok());
  Flat f(t);
  const std::vector<double> b0 = {0.3, -0.4, 1.2};  // ||b0|| = 1.3
  testing::set_block(t, 1, &f.p, b0);
  testing::set_block(t, 2, &f.p, {1, 1, 1, 1});
  testing::set_block(t, 1, &f.g, {0.5, -0.25, 1.0});
  opt->update(t, f.buffers(), 1, kLr, nullptr);
  for (size_t i = 0; i < 4; ++i) EXPECT_EQ(f.p[t[2].offset + i], 1.0f);  // no decay
  std::vector<double> d(3);
  for (size_t i = 0; i < 3; ++i) d[i] = f.p[t[1].offset + i] - b0[i];
  EXPECT_NEAR(testing::norm(d), kLr * 1.3, 1e-6);
}

// Multiplying every gradient by c changes gh only through eps: gh = c g/(c||g|| + eps).
// Three updates at c = 1, 1e3 and 1e-2 agree to ~eps/||c g|| (the default eps, 1e-6, here).
TEST(Lans, InvariantToGradientScale) {
  const ParamTable t = testing::small_table();
  std::vector<std::vector<float>> results;
  for (double c : {1.0, 1e3, 1e-2}) {
    Flat f(t);
    testing::set_block(t, 0, &f.p, {0.5, -0.3, 0.2, 0.1, -0.4, 0.6});
    testing::set_block(t, 2, &f.p, {1, 1, 1, 1});
    auto opt = lans(1e-6);
    testing::Lcg rng(7);
    for (int step = 1; step <= 3; ++step) {
      for (size_t j = 0; j < f.g.size(); ++j) f.g[j] = 0;
      for (size_t b = 0; b < t.size(); ++b)
        for (size_t i = 0; i < t[b].numel; ++i)
          f.g[t[b].offset + i] = static_cast<float>(c * rng.next());
      opt->update(t, f.buffers(), step, kLr, nullptr);
    }
    results.push_back(f.p);
  }
  for (size_t k = 1; k < results.size(); ++k)
    for (size_t j = 0; j < results[0].size(); ++j)
      EXPECT_NEAR(results[k][j], results[0][j], 2e-5) << "scale case " << k << " element " << j;
}

TEST(Optimizer, SelectedByNameAndValidated) {
  std::unique_ptr<Optimizer> o;
  for (const std::string& n : optimizer_names()) {
    ASSERT_TRUE(make_optimizer(n, OptimizerConfig{}, &o).is_ok()) << n;
    EXPECT_EQ(o->name(), n);
  }
  // The spec's defaults (OPTIMIZERS.md), which the tests above replace with a visible eps.
  EXPECT_EQ(OptimizerConfig{}.beta1, 0.9);
  EXPECT_EQ(OptimizerConfig{}.beta2, 0.999);
  EXPECT_EQ(OptimizerConfig{}.eps, 1e-6);
  Status s = make_optimizer("sgd", OptimizerConfig{}, &o);
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  OptimizerConfig bad;
  bad.beta2 = 1.0;
  s = make_optimizer("lans", bad, &o);
  EXPECT_NE(s.message().find("beta2"), std::string::npos) << s.message();
}

}  // namespace
}  // namespace lansbert
