// LAMB (apex FusedLAMB and the NVLAMB switch) and AdamW against double-precision numbers
// written from the formulas of OPTIMIZERS.md, including a LAMB run where global-norm clipping
// is active on every step.
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

std::unique_ptr<Optimizer> make(const std::string& name, bool nvlamb = false) {
  OptimizerConfig c;
  c.weight_decay = kWd;
  c.trust_ratio_on_excluded = nvlamb;
  c.eps = kEps;
  std::unique_ptr<Optimizer> o;
  EXPECT_TRUE(make_optimizer(name, c, &o).is_ok());
  return o;
}

// Three steps whose global gradient norm is 2-3 (> max_grad_norm = 1), so every step divides
// all gradients by G. Expected values (ref_clip + ref_adam_family):
//   G = sqrt(sum of all g^2); g' = g/(G/1) when G > 1; m = b1 m + (1-b1) g';
//   v = b2 v + (1-b2) g'^2; u = m/(1-b1^t) / (sqrt(v/(1-b2^t)) + eps) + wd p;
//   LAMB: p -= lr r u, r = ||p||/||u|| only where wd != 0 (apex) or everywhere (NVLAMB);
//   AdamW: p -= lr u.
void run_three_steps(const std::string& name, bool nvlamb) {
  const ParamTable t = testing::small_table();
  Flat f(t);
  std::vector<RefBlock> ref(3);
  ref[0].p = {0.5, -0.3, 0.2, 0.1, -0.4, 0.6};
  ref[0].wd = kWd;
  ref[1].p = {0, 0, 0};
  ref[2].p = {1, 1.5, 1, 0.5};
  for (size_t b = 0; b < 3; ++b) {
    ref[b].m.assign(ref[b].p.size(), 0);
    ref[b].v.assign(ref[b].p.size(), 0);
    testing::set_block(t, b, &f.p, ref[b].p);
  }
  const std::vector<std::vector<std::vector<double>>> grads = {
      {{1.0, -0.2, 0.3, 0.5, -1.0, 0.2}, {0.5, -0.25, 1.0}, {0.01, -0.02, 0.03, 0.0}},
      {{-0.3, 1.1, 0.0, 0.2, 0.4, -0.1}, {1.2, 0.2, -0.1}, {0.5, 0.1, -0.2, 0.3}},
      {{0.05, 0.05, -2.0, 0.1, 0.0, 0.3}, {-0.4, 0.1, 0.3}, {0.0, 0.0, 0.0, 0.0}},
  };
  auto opt = make(name, nvlamb);
  const bool lamb = name == "lamb";
  for (int step = 1; step <= 3; ++step) {
    const auto& g = grads[step - 1];
    const double clip = testing::ref_clip(g, 1.0);
    ASSERT_GT(clip, 1.5) << "the test wants clipping active";
    for (size_t b = 0; b < 3; ++b) {
      testing::set_block(t, b, &f.g, g[b]);
      const bool ratio = lamb && (ref[b].wd != 0 || nvlamb);
      testing::ref_adam_family(&ref[b], g[b], clip, step, kLr, kB1, kB2, kEps, ratio);
    }
    UpdateStats stats;
    opt->update(t, f.buffers(), step, kLr, &stats);
    EXPECT_NEAR(stats.clip_divisor, clip, 1e-7 * clip);  // fp32 inputs
    for (size_t b = 0; b < 3; ++b) testing::expect_block_near(t, b, f, ref[b], 2e-5);
    // The trust ratios applied: LAMB's (NaN for apex's excluded blocks); none for AdamW.
    if (lamb) {
      testing::expect_ratios_near(stats.trust_ratio, ref, /*grad=*/false, 1e-5);
      EXPECT_EQ(std::isnan(stats.trust_ratio[1]), !nvlamb);
    } else {
      EXPECT_TRUE(stats.trust_ratio.empty());
    }
    EXPECT_TRUE(stats.trust_ratio_grad.empty());
  }
}

TEST(Lamb, ApexMatchesFormulaWithClipping) {
  run_three_steps("lamb", false);
}
TEST(Lamb, NvLambMatchesFormulaWithClipping) {
  run_three_steps("lamb", true);
}
TEST(AdamW, MatchesFormulaWithClipping) {
  run_three_steps("adamw", false);
}

// Excluded bias b0 (||b0|| = 1.3), one step, small gradient (no clipping). At t = 1,
// u = g/(|g|+eps) per element (~ sign(g)) and wd = 0. apex: p moves by lr*u (no ratio), so
// ||dp|| = lr*||u|| ~ lr*sqrt(3). NVLAMB: r = ||p||/||u||, so ||dp|| = lr*||p|| = lr*1.3.
// A zero gradient on the excluded gamma leaves it untouched either way (no decay).
TEST(Lamb, TrustRatioOnExcludedOnlyWithSwitch) {
  const ParamTable t = testing::small_table();
  const std::vector<double> b0 = {0.3, -0.4, 1.2};
  for (bool nvlamb : {false, true}) {
    Flat f(t);
    testing::set_block(t, 1, &f.p, b0);
    testing::set_block(t, 2, &f.p, {1, 1, 1, 1});
    testing::set_block(t, 1, &f.g, {0.05, -0.025, 0.1});
    auto opt = make("lamb", nvlamb);
    opt->update(t, f.buffers(), 1, kLr, nullptr);
    std::vector<double> d(3);
    for (size_t i = 0; i < 3; ++i) d[i] = f.p[t[1].offset + i] - b0[i];
    // NVLAMB: a step of lr ||p|| (1.3); apex: no ratio, u = g/(|g| + eps) at t = 1 (no clip:
    // G < 1), each element just under 1 in size.
    double apex_step = 0;
    for (double g : {0.05, -0.025, 0.1}) apex_step += std::pow(kLr * g / (std::fabs(g) + kEps), 2);
    const double expect = nvlamb ? kLr * 1.3 : std::sqrt(apex_step);
    EXPECT_NEAR(testing::norm(d), expect, 1e-5) << (nvlamb ? "nvlamb" : "apex");
    for (size_t i = 0; i < 4; ++i) EXPECT_EQ(f.p[t[2].offset + i], 1.0f);
  }
}

// Zero-initialised bias under NVLAMB: ||p|| = 0, the ratio falls back to 1 (no NaN).
// An all-zero gradient everywhere: u = wd p (weight) or 0, all finite.
TEST(Lamb, ZeroBiasAndZeroGradientStayFinite) {
  const ParamTable t = testing::small_table();
  Flat f(t);
  testing::set_block(t, 0, &f.p, {0.5, -0.3, 0.2, 0.1, -0.4, 0.6});
  auto opt = make("lamb", true);
  opt->update(t, f.buffers(), 1, kLr, nullptr);
  for (size_t j = 0; j < f.p.size(); ++j) {
    EXPECT_TRUE(std::isfinite(f.p[j]) && std::isfinite(f.m[j]) && std::isfinite(f.v[j]));
  }
  // u = wd p, r = ||p||/(wd ||p||): the weight shrinks by lr.
  EXPECT_NEAR(f.p[t[0].offset], 0.5 * (1 - kLr), 1e-6);
}

// AdamW on excluded blocks: no decay. A zero gradient on gamma leaves it as it was.
TEST(AdamW, ExcludedBlocksGetNoDecay) {
  const ParamTable t = testing::small_table();
  Flat f(t);
  testing::set_block(t, 0, &f.p, {1, 1, 1, 1, 1, 1});
  testing::set_block(t, 2, &f.p, {1, 1, 1, 1});
  auto opt = make("adamw");
  opt->update(t, f.buffers(), 1, kLr, nullptr);
  for (size_t i = 0; i < 4; ++i) EXPECT_EQ(f.p[t[2].offset + i], 1.0f);
  // Weight: u = 0/(0+eps) + wd*1, so p = 1 - lr*wd.
  for (size_t i = 0; i < 6; ++i) EXPECT_NEAR(f.p[t[0].offset + i], 1 - kLr * kWd, 1e-7);
}

}  // namespace
}  // namespace lansbert
