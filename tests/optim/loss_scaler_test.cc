// LossScaler: unscaling, per-block inf/NaN detection, backoff with hysteresis, growth, the
// floor error, and the static/none modes' consecutive-skip limit.
#include "lansbert/optim/loss_scaler.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <vector>

namespace lansbert {
namespace {

ParamTable table3() {
  ParamTable t;
  t.add("a", {100}, ParamRole::kWeight);
  t.add("b", {40000}, ParamRole::kWeight);  // spans several chunks
  t.add("c", {7}, ParamRole::kBias);
  return t;
}

LossScalerConfig dynamic(double init, int64_t hysteresis) {
  LossScalerConfig c;
  c.mode = LossScaleMode::kDynamic;
  c.initial_scale = init;
  c.hysteresis = hysteresis;
  c.growth_interval = 3;
  c.min_scale = 128;
  return c;
}

TEST(LossScaler, UnscalesAndFindsNonFiniteBlocks) {
  const ParamTable t = table3();
  std::vector<float> g(t.total_elements(), 0.f);
  for (size_t i = 0; i < t[0].numel; ++i) g[t[0].offset + i] = 1024.f;
  LossScaler s(dynamic(1024, 1));
  GradCheck ok = s.unscale_and_check(t, g.data());
  EXPECT_TRUE(ok.finite);
  EXPECT_EQ(g[t[0].offset + 5], 1.0f);
  g[t[1].offset + 39999] = std::numeric_limits<float>::quiet_NaN();
  g[t[2].offset + 3] = std::numeric_limits<float>::infinity();
  g[t[2].offset + 4] = -std::numeric_limits<float>::infinity();
  GradCheck bad = s.unscale_and_check(t, g.data());
  EXPECT_FALSE(bad.finite);
  EXPECT_EQ(bad.nonfinite_values, 3u);
  EXPECT_EQ(bad.nonfinite_blocks, (std::vector<size_t>{1, 2}));
}

// hysteresis 2: the first overflow only spends hysteresis, the second halves the scale, and
// (Megatron semantics) later overflows halve it each time until a growth refills hysteresis.
TEST(LossScaler, BackoffWithHysteresis) {
  const ParamTable t = table3();
  LossScaler s(dynamic(1024, 2));
  GradCheck bad;
  bad.finite = false;
  ASSERT_TRUE(s.on_overflow(t, bad, 1).is_ok());
  EXPECT_EQ(s.scale(), 1024);
  ASSERT_TRUE(s.on_overflow(t, bad, 2).is_ok());
  EXPECT_EQ(s.scale(), 512);
  ASSERT_TRUE(s.on_overflow(t, bad, 3).is_ok());
  EXPECT_EQ(s.scale(), 256);
}

// growth_interval 3: three clean steps double the scale; an overflow resets the count.
TEST(LossScaler, GrowthAfterInterval) {
  const ParamTable t = table3();
  LossScaler s(dynamic(1024, 1));
  s.on_finite();
  s.on_finite();
  GradCheck bad;
  bad.finite = false;
  ASSERT_TRUE(s.on_overflow(t, bad, 1).is_ok());  // 512, count reset
  EXPECT_EQ(s.scale(), 512);
  s.on_finite();
  s.on_finite();
  EXPECT_EQ(s.scale(), 512);
  s.on_finite();
  EXPECT_EQ(s.scale(), 1024);
  EXPECT_EQ(s.state().growth_tracker, 0);
}

// min_scale 128 from 512, hysteresis 1: 512 -> 256 -> 128, then an overflow at the floor is
// an error naming the skips and the blocks.
TEST(LossScaler, FloorIsAnErrorWithDiagnostics) {
  const ParamTable t = table3();
  LossScaler s(dynamic(512, 1));
  GradCheck bad;
  bad.finite = false;
  bad.nonfinite_values = 2;
  bad.nonfinite_blocks = {1, 2};
  ASSERT_TRUE(s.on_overflow(t, bad, 1).is_ok());
  ASSERT_TRUE(s.on_overflow(t, bad, 2).is_ok());
  EXPECT_EQ(s.scale(), 128);
  Status err = s.on_overflow(t, bad, 3);
  ASSERT_EQ(err.code(), StatusCode::kDiverged) << err.to_string();
  EXPECT_EQ(err.exit_code(), 7);
  EXPECT_NE(err.message().find("floor"), std::string::npos) << err.message();
  EXPECT_NE(err.message().find("3 consecutive"), std::string::npos) << err.message();
  EXPECT_NE(err.message().find("b, c"), std::string::npos) << err.message();
}

TEST(LossScaler, StaticAndNoneModes) {
  const ParamTable t = table3();
  LossScalerConfig c;
  c.mode = LossScaleMode::kNone;
  c.max_consecutive_skips = 2;
  LossScaler none(c);
  EXPECT_EQ(none.scale(), 1.0);
  std::vector<float> g(t.total_elements(), 3.f);
  EXPECT_TRUE(none.unscale_and_check(t, g.data()).finite);
  EXPECT_EQ(g[0], 3.f);
  GradCheck bad;
  bad.finite = false;
  EXPECT_TRUE(none.on_overflow(t, bad, 1).is_ok());
  EXPECT_EQ(none.on_overflow(t, bad, 2).code(), StatusCode::kDiverged);

  c.mode = LossScaleMode::kStatic;
  c.initial_scale = 4;
  LossScaler fixed(c);
  EXPECT_EQ(fixed.scale(), 4.0);
  fixed.unscale_and_check(t, g.data());
  EXPECT_EQ(g[0], 0.75f);
  for (int i = 0; i < 5000; ++i) fixed.on_finite();
  EXPECT_EQ(fixed.scale(), 4.0);
}

TEST(LossScaler, ConfigValidation) {
  LossScalerConfig c = dynamic(1024, 1);
  c.backoff_factor = 1.5;
  EXPECT_NE(c.validate().message().find("backoff_factor"), std::string::npos);
  c = dynamic(1024, 1);
  c.min_scale = 4096;
  EXPECT_FALSE(c.validate().is_ok());
  LossScaleMode m;
  EXPECT_TRUE(parse_loss_scale_mode("dynamic", &m).is_ok());
  EXPECT_FALSE(parse_loss_scale_mode("auto", &m).is_ok());
}

}  // namespace
}  // namespace lansbert
