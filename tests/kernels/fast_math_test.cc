// The vectorisable float exp and normal CDF against libm in double, over their whole range.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "lansbert/kernels/activations.h"
#include "lansbert/kernels/fast_math.h"
#include "fd.h"

namespace lansbert {
namespace {

// Distance in units in the last place of `expected` rounded to float.
double ulps(float got, double expected) {
  const float e = float(expected);
  const double ulp = std::nextafter(e, std::numeric_limits<float>::infinity()) - e;
  return std::abs(double(got) - expected) / ulp;
}

TEST(FastMath, ExpWithinTwoUlpAcrossTheRange) {
  double worst = 0;
  for (double x = -87.0; x <= 88.5; x += 0.001) {
    worst = std::max(worst, ulps(kern::exp_f32(float(x)), std::exp(double(float(x)))));
  }
  EXPECT_LE(worst, 2.0);
}

TEST(FastMath, ExpEdgeCases) {
  EXPECT_EQ(kern::exp_f32(0.0f), 1.0f);
  EXPECT_EQ(kern::exp_f32(-100.0f), 0.0f);
  EXPECT_EQ(kern::exp_f32(-std::numeric_limits<float>::infinity()), 0.0f);
  EXPECT_TRUE(std::isinf(kern::exp_f32(89.0f)));
  EXPECT_TRUE(std::isnan(kern::exp_f32(std::nanf(""))));
}

TEST(FastMath, NormalCdfRelativeErrorBelowThreeMillionths) {
  // Float z*z limits relative accuracy far out in the lower tail (the exp argument carries
  // an absolute error of ~z^2 * 6e-8), so the bound loosens there.
  double worst = 0, worst_far = 0, worst_tail = 0;
  for (double x = -12.0; x <= 12.0; x += 0.0007) {
    const float xf = float(x);
    const double exact = 0.5 * std::erfc(-double(xf) / std::sqrt(2.0));
    const double err = std::abs(kern::normal_cdf_f32(xf) - exact);
    if (x >= -5.0) {
      worst = std::max(worst, err / exact);
    } else if (x >= -8.0) {
      worst_far = std::max(worst_far, err / exact);
    } else {
      worst_tail = std::max(worst_tail, err);
    }
  }
  EXPECT_LT(worst, 3e-6);
  EXPECT_LT(worst_far, 1e-5);
  EXPECT_LT(worst_tail, 1e-20);
}

// The float tanh form (a logistic through exp_f32) against the double textbook formula, in
// relative terms down the lower tail where 1 + tanh cancels (1 + tanh(u) = 2 / (1 + e^-2u)).
// There exp(-2u) magnifies u's float rounding by |2u| (u = -26 at x = -9): the looser bound.
TEST(FastMath, FloatTanhGeluTracksDoubleTanhGelu) {
  double worst = 0, worst_far = 0, worst_grad = 0;
  for (double x = -9.0; x <= 9.0; x += 0.0013) {
    const float xf = float(x);
    const double xd = xf, u = std::sqrt(2 / M_PI) * (xd + 0.044715 * xd * xd * xd);
    const double s = 1 / (1 + std::exp(-2 * u));
    const double g = xd * s;
    const double dg = s + 2 * xd * s * (1 - s) * std::sqrt(2 / M_PI) * (1 + 3 * 0.044715 * xd * xd);
    double& w = x >= -5 ? worst : worst_far;
    if (g != 0) w = testing::worse(w, std::abs(kern::gelu_tanh(xf) - g) / std::abs(g));
    worst_grad = testing::worse(worst_grad, std::abs(kern::gelu_tanh_grad(1.0f, xf) - dg));
    EXPECT_EQ(kern::gelu(xf, kern::GeluForm::kTanh), kern::gelu_tanh(xf));
    EXPECT_EQ(kern::gelu_grad(1.0f, xf, kern::GeluForm::kErf), kern::gelu_grad(1.0f, xf));
  }
  EXPECT_LT(worst, 3e-6);
  EXPECT_LT(worst_far, 1e-5);
  EXPECT_LT(worst_grad, 3e-6);
}

TEST(FastMath, FloatGeluTracksDoubleGelu) {
  for (double x = -9.0; x <= 9.0; x += 0.0013) {
    const float xf = float(x);
    // x Phi(x) through erfc, which does not cancel in the lower tail as 1 + erf does.
    const double g = 0.5 * double(xf) * std::erfc(-double(xf) / std::sqrt(2.0));
    EXPECT_NEAR(kern::gelu(xf), g, (x >= -5 ? 3e-6 : 1e-5) * std::abs(g) + 1e-30) << x;
    EXPECT_NEAR(kern::gelu_grad(1.0f, xf), kern::gelu_grad(1.0, double(xf)), 1e-6) << x;
  }
}

}  // namespace
}  // namespace lansbert
