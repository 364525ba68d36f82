// Learning-rate schedules at their breakpoints (first update, end of warmup, end of the
// constant phase, last update), against values computed by hand from OPTIMIZERS.md.
#include "lansbert/optim/schedule.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>

namespace lansbert {
namespace {

ScheduleConfig lans_cfg(FirstUpdate fu) {
  ScheduleConfig c;
  c.kind = ScheduleKind::kLans;
  c.peak_lr = 0.01;
  c.total_steps = 100;
  c.warmup_ratio = 0.1;    // warmup: s in [0, 10)
  c.constant_ratio = 0.3;  // constant: s in [10, 40)
  c.decay_power = 1.0;
  c.first_update = fu;
  return c;
}

// mult0, T = 100, w = 0.1, c = 0.3, p = 1, x = s/100:
//   s = 0 (first update): x/w = 0                      -> lr 0
//   s = 5: 0.05/0.1 = 0.5                              -> 0.005
//   s = 10 (end of warmup): x = w -> constant phase    -> 0.01
//   s = 39 (last constant update)                      -> 0.01
//   s = 40: (1-0.4)/(1-0.4) = 1 (continuous)           -> 0.01
//   s = 70: (0.3)/(0.6) = 0.5                          -> 0.005
//   s = 99 (last update): 0.01/0.6 = 1/60              -> 0.01/60
//   s = 100 (past the end)                             -> 0
TEST(Schedule, LansMult0Breakpoints) {
  LrSchedule s(lans_cfg(FirstUpdate::kMult0));
  EXPECT_EQ(s.lr(0), 0.0);
  EXPECT_NEAR(s.lr(5), 0.005, 1e-15);
  EXPECT_NEAR(s.lr(9), 0.009, 1e-15);
  EXPECT_NEAR(s.lr(10), 0.01, 1e-15);
  EXPECT_NEAR(s.lr(39), 0.01, 1e-15);
  EXPECT_NEAR(s.lr(40), 0.01, 1e-15);
  EXPECT_NEAR(s.lr(70), 0.005, 1e-15);
  EXPECT_NEAR(s.lr(99), 0.01 / 60, 1e-15);
  EXPECT_EQ(s.lr(100), 0.0);
}

// mult1: x = (s+1)/100. First update: 0.01/0.1 = 0.1 -> 0.001. End of warmup reached at s = 9.
// Last update s = 99: x = 1 -> 0.
TEST(Schedule, LansMult1Breakpoints) {
  LrSchedule s(lans_cfg(FirstUpdate::kMult1));
  EXPECT_NEAR(s.lr(0), 0.001, 1e-15);
  EXPECT_NEAR(s.lr(9), 0.01, 1e-15);
  EXPECT_NEAR(s.lr(69), 0.005, 1e-15);
  EXPECT_NEAR(s.lr(98), 0.01 / 60, 1e-15);
  EXPECT_EQ(s.lr(99), 0.0);
}

// Step counts override ratios; decay power 2: s = 70 -> (0.3/0.6)^2 = 0.25.
TEST(Schedule, LansStepCountsAndPower) {
  ScheduleConfig c = lans_cfg(FirstUpdate::kMult0);
  c.warmup_ratio = 0.5;  // overridden
  c.warmup_steps = 10;
  c.constant_steps = 30;
  c.decay_power = 2.0;
  LrSchedule s(c);
  EXPECT_NEAR(s.lr(5), 0.005, 1e-15);
  EXPECT_NEAR(s.lr(10), 0.01, 1e-15);
  EXPECT_NEAR(s.lr(70), 0.0025, 1e-15);
}

// NVIDIA poly warmup (mult1, its own 1-based convention), T = 100, w = 0.25:
//   s = 0: t = 1, x = 0.01: 0.01/0.25 = 0.04
//   s = 23: t = 24, x = 0.24: 0.96;  s = 24: t = 25, x = w: sqrt(0.75) (the jump)
//   s = 98: sqrt(0.01) = 0.1;  s = 99 (last update): t = 100, x = 1: 0
TEST(Schedule, NvidiaPolyWarmupBreakpoints) {
  ScheduleConfig c;
  c.kind = ScheduleKind::kNvidiaPolyWarmup;
  c.peak_lr = 1.0;
  c.total_steps = 100;
  c.warmup_ratio = 0.25;
  c.first_update = FirstUpdate::kMult1;
  LrSchedule s(c);
  EXPECT_NEAR(s.lr(0), 0.04, 1e-15);
  EXPECT_NEAR(s.lr(23), 0.96, 1e-15);
  EXPECT_NEAR(s.lr(24), std::sqrt(0.75), 1e-15);
  EXPECT_NEAR(s.lr(98), 0.1, 1e-12);
  EXPECT_EQ(s.lr(99), 0.0);
}

// A kind with a peak of 1 over T = 100 updates, warmup 0.1 (10 updates), mult0.
ScheduleConfig unit_cfg(ScheduleKind kind) {
  ScheduleConfig c;
  c.kind = kind;
  c.peak_lr = 1.0;
  c.total_steps = 100;
  c.warmup_ratio = 0.1;
  return c;
}

// Linear warmup + linear decay, mult0, T = 100, w = 0.1: s = 0 -> 0; s = 10 -> 1;
// s = 55 -> 0.45/0.9 = 0.5; s = 99 -> 0.01/0.9.
TEST(Schedule, LinearBreakpoints) {
  LrSchedule s(unit_cfg(ScheduleKind::kLinear));
  EXPECT_EQ(s.lr(0), 0.0);
  EXPECT_NEAR(s.lr(10), 1.0, 1e-15);
  EXPECT_NEAR(s.lr(55), 0.5, 1e-15);
  EXPECT_NEAR(s.lr(99), 0.01 / 0.9, 1e-15);
}

// Cosine, mult0, T = 100, w = 0.1: s = 0 -> 0; s = 5 -> 0.5; s = 10 -> 1; s = 55 (half way
// through the decay) -> 0.5, with min_ratio 0.1 -> 0.1 + 0.9 * 0.5 = 0.55; s = 100 -> 0. Every
// step against Hugging Face's get_cosine_schedule_with_warmup as its lambda is written, in
// whole steps (lr_lambda(s) for the update after s, its scheduler stepped after the optimizer
// as mult0), and with a floor as Megatron-LM's min_lr + (lr - min_lr) * cosine factor.
TEST(Schedule, CosineBreakpointsAndEveryStepAgainstTheReferences) {
  ScheduleConfig c = unit_cfg(ScheduleKind::kCosine);
  LrSchedule s(c);
  EXPECT_EQ(s.lr(0), 0.0);
  EXPECT_NEAR(s.lr(5), 0.5, 1e-15);
  EXPECT_NEAR(s.lr(10), 1.0, 1e-15);
  EXPECT_NEAR(s.lr(55), 0.5, 1e-15);
  EXPECT_EQ(s.lr(100), 0.0);
  const double pi = 3.14159265358979323846;
  auto hf = [&](int64_t step, int64_t warmup, int64_t total) {
    if (step < warmup) return double(step) / double(std::max<int64_t>(1, warmup));
    const double progress = double(step - warmup) / double(std::max<int64_t>(1, total - warmup));
    return std::max(0.0, 0.5 * (1.0 + std::cos(pi * 2.0 * 0.5 * progress)));
  };
  for (int64_t step = 0; step < 100; ++step) ASSERT_NEAR(s.lr(step), hf(step, 10, 100), 1e-12) << step;
  c.min_ratio = 0.1;
  c.first_update = FirstUpdate::kMult1;  // the update after s uses position s + 1
  LrSchedule floor(c);
  EXPECT_NEAR(floor.lr(54), 0.55, 1e-15);
  for (int64_t step = 10; step < 99; ++step)
    ASSERT_NEAR(floor.lr(step), 0.1 + 0.9 * hf(step + 1, 10, 100), 1e-12) << step;
  EXPECT_NEAR(floor.lr(98), 0.1 + 0.9 * 0.5 * (1 + std::cos(pi * 89 / 90)), 1e-15);  // its last update: near 0.1
  EXPECT_EQ(floor.lr(99), 0.1);  // mult1's last update, at position T: the floor, as Megatron-LM's min_lr
  EXPECT_EQ(floor.lr(150), 0.1);  // and past the end (without a floor: 0, as at s = 100 above)
}

TEST(Schedule, ConstantIsPeakEverywhere) {
  ScheduleConfig c;
  c.kind = ScheduleKind::kConstant;
  c.peak_lr = 0.003;
  LrSchedule s(c);
  EXPECT_EQ(s.lr(0), 0.003);
  EXPECT_EQ(s.lr(123456), 0.003);
}

TEST(Schedule, SqrtBatchScaling) {
  EXPECT_NEAR(sqrt_batch_scaled_lr(0.007, 32768, 98304), 0.007 * std::sqrt(3.0), 1e-15);
  EXPECT_EQ(sqrt_batch_scaled_lr(0.006, 65536, 65536), 0.006);
  EXPECT_NEAR(sqrt_batch_scaled_lr(0.01, 1024, 256), 0.005, 1e-15);
}

TEST(Schedule, ValidationNamesTheField) {
  ScheduleConfig c = lans_cfg(FirstUpdate::kMult0);
  c.constant_ratio = 0.95;
  EXPECT_FALSE(c.validate().is_ok());
  c = lans_cfg(FirstUpdate::kMult0);
  c.total_steps = 0;
  EXPECT_NE(c.validate().message().find("total_steps"), std::string::npos);
  // Each refusal leads with the key to fix (the config layer locates it) and gives the numbers.
  const struct {
    void (*edit)(ScheduleConfig*);
    const char* says;
  } bad[] = {
      {[](ScheduleConfig* s) { s->warmup_steps = -5; }, "schedule.warmup_steps -5: must be at least 0"},
      {[](ScheduleConfig* s) { s->constant_steps = 101; }, "schedule.constant_steps 101 exceeds schedule.total_steps 100"},
      {[](ScheduleConfig* s) { s->warmup_steps = 80; },
       "schedule.warmup_steps: the warmup (schedule.warmup_steps 80) and the constant phase (schedule.constant_ratio "
       "0.25 (25 steps)) exceed schedule.total_steps 100"},
      {[](ScheduleConfig* s) { s->constant_ratio = 0.97; },  // the key set leads, not the default beside it
       "schedule.constant_ratio: the warmup (schedule.warmup_ratio 0.05 (5 steps)) and the constant phase "
       "(schedule.constant_ratio 0.97 (97 steps)) exceed schedule.total_steps 100 (a schedule without a constant "
       "phase: schedule.constant_ratio: 0)"},
      {[](ScheduleConfig* s) { s->warmup_steps = 80, s->constant_steps = 30; },
       "exceed schedule.total_steps 100 (a schedule without a constant phase: schedule.constant_steps: 0)"},
      {[](ScheduleConfig* s) { s->kind = ScheduleKind::kLinear, s->constant_ratio = 0.1; },
       "schedule.constant_ratio: only kind lans has a constant phase (kind is linear)"},
      {[](ScheduleConfig* s) { s->kind = ScheduleKind::kNvidiaPolyWarmup, s->constant_steps = 10; },
       "schedule.constant_steps: only kind lans has a constant phase"},
      {[](ScheduleConfig* s) { s->kind = ScheduleKind::kNvidiaPolyWarmup, s->decay_power = 2; },
       "schedule.decay_power: only kind lans takes a decay power (kind nvidia_poly_warmup decays with power 0.5)"},
      {[](ScheduleConfig* s) { s->kind = ScheduleKind::kConstant, s->warmup_steps = 10; },
       "schedule.warmup_steps: kind constant has no warmup"},
      {[](ScheduleConfig* s) { s->kind = ScheduleKind::kConstant, s->decay_power = 3; },
       "schedule.decay_power: only kind lans takes a decay power (kind constant does not decay)"},
      {[](ScheduleConfig* s) { s->kind = ScheduleKind::kConstant, s->constant_ratio = 0.5; },
       "schedule.constant_ratio: only kind lans has a constant phase (kind is constant)"},
      {[](ScheduleConfig* s) { s->kind = ScheduleKind::kCosine, s->constant_ratio = 0.5; },
       "schedule.constant_ratio: only kind lans has a constant phase (kind is cosine)"},
      {[](ScheduleConfig* s) { s->kind = ScheduleKind::kCosine, s->decay_power = 2; },
       "schedule.decay_power: only kind lans takes a decay power (kind cosine decays along a half cosine)"},
      {[](ScheduleConfig* s) { s->min_ratio = 0.1; },
       "schedule.min_ratio: only kind cosine decays to a floor (kind is lans; the others decay to 0)"},
      {[](ScheduleConfig* s) { s->kind = ScheduleKind::kCosine, s->constant_ratio = 0, s->min_ratio = 1; },
       "schedule.min_ratio 1: must be in [0, 1) (a fraction of optimizer.lr)"},
      {[](ScheduleConfig* s) { s->kind = ScheduleKind::kCosine, s->constant_ratio = 0, s->min_ratio = -0.5; },
       "schedule.min_ratio -0.5: must be in [0, 1)"},
  };
  for (const auto& b : bad) {
    c = ScheduleConfig{};  // the defaults: kind lans, warmup 0.05, constant 0.25
    c.total_steps = 100;
    b.edit(&c);
    EXPECT_NE(c.validate().message().find(b.says), std::string::npos) << c.validate().message();
  }
  // A constant ratio (or a constant kind's warmup) of 0 says "none", which every kind has:
  // accepted.
  c = lans_cfg(FirstUpdate::kMult0);
  c.kind = ScheduleKind::kLinear;
  c.constant_ratio = 0;
  EXPECT_TRUE(c.validate().is_ok()) << c.validate().message();
  c = ScheduleConfig{};
  c.kind = ScheduleKind::kConstant;
  c.warmup_ratio = 0;
  c.warmup_steps = 0;
  EXPECT_TRUE(c.validate().is_ok()) << c.validate().message();
  ScheduleKind k;
  EXPECT_TRUE(parse_schedule_kind("nvidia_poly_warmup", &k).is_ok());
  EXPECT_EQ(k, ScheduleKind::kNvidiaPolyWarmup);
  EXPECT_TRUE(parse_schedule_kind("cosine", &k).is_ok());
  EXPECT_EQ(k, ScheduleKind::kCosine);
  EXPECT_FALSE(parse_schedule_kind("cosine_with_restarts", &k).is_ok());
  FirstUpdate f;
  EXPECT_TRUE(parse_first_update("mult1", &f).is_ok());
  EXPECT_EQ(f, FirstUpdate::kMult1);
}

}  // namespace
}  // namespace lansbert
