// bf16 rounding (the shared body the GPU optimizer uses for its bf16 weight copy): exact
// values survive, ties go to even, overflow rounds to infinity, NaN stays NaN.
#include "lansbert/kernels/half.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>

namespace lansbert::kern {
namespace {

TEST(Bf16, ExactValuesRoundTrip) {
  for (float x : {0.0f, -0.0f, 1.0f, -2.5f, 0.15625f, 65536.0f}) {
    EXPECT_EQ(bf16_to_float(float_to_bf16(x)), x) << x;
  }
  EXPECT_EQ(float_to_bf16(1.0f), 0x3f80);
}

TEST(Bf16, RoundsToNearestTiesToEven) {
  // 1 + 2^-8 is halfway between 1 and 1 + 2^-7: ties to the even mantissa (1).
  EXPECT_EQ(bf16_to_float(float_to_bf16(1.0f + 0x1p-8f)), 1.0f);
  // 1 + 3*2^-8 is halfway between 1 + 2^-7 and 1 + 2^-6: ties to even (1 + 2^-6).
  EXPECT_EQ(bf16_to_float(float_to_bf16(1.0f + 3 * 0x1p-8f)), 1.0f + 0x1p-6f);
  // Just above the tie rounds up.
  EXPECT_EQ(bf16_to_float(float_to_bf16(1.0f + 0x1p-8f + 0x1p-20f)), 1.0f + 0x1p-7f);
  EXPECT_EQ(bf16_to_float(float_to_bf16(-(1.0f + 0x1p-8f + 0x1p-20f))), -(1.0f + 0x1p-7f));
}

TEST(Bf16, OverflowAndNaN) {
  const float big = std::numeric_limits<float>::max();
  EXPECT_TRUE(std::isinf(bf16_to_float(float_to_bf16(big))));
  EXPECT_TRUE(std::isinf(bf16_to_float(float_to_bf16(std::numeric_limits<float>::infinity()))));
  EXPECT_TRUE(std::isnan(bf16_to_float(float_to_bf16(std::numeric_limits<float>::quiet_NaN()))));
  // A NaN whose payload sits only in the low bits must not become infinity.
  EXPECT_TRUE(std::isnan(bf16_to_float(float_to_bf16(bits_float(0x7f800001u)))));
}

}  // namespace
}  // namespace lansbert::kern
