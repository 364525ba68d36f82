// bf16 and fp16 rounding (the shared bodies behind the mixed-precision GEMMs on both
// backends): exact values survive, ties go to even, overflow rounds to infinity, NaN stays
// NaN. fp16 is checked against the compiler's own IEEE binary16 conversion (_Float16).
#include "lansbert/kernels/half.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>

#include "f16_bits.h"

namespace lansbert::kern {
namespace {

using testing::bits_to_f16;
using testing::f16_bits;

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

TEST(Bf16, RoundToBf16IsTheCastValue) {
  EXPECT_EQ(round_to_bf16(1.0f + 0x1p-8f + 0x1p-20f), 1.0f + 0x1p-7f);
  EXPECT_EQ(round_to_bf16(3.0f), 3.0f);
}

// Every fp16 pattern converts to float and back unchanged (NaN payloads stay NaN).
TEST(Fp16, EveryPatternRoundTrips) {
  for (uint32_t h = 0; h < 0x10000u; ++h) {
    const float x = fp16_to_float(static_cast<uint16_t>(h));
    if (std::isnan(x)) {
      EXPECT_TRUE(std::isnan(fp16_to_float(float_to_fp16(x)))) << std::hex << h;
      continue;
    }
    ASSERT_EQ(float_to_fp16(x), h) << std::hex << h;
    ASSERT_EQ(x, static_cast<float>(bits_to_f16(static_cast<uint16_t>(h)))) << std::hex << h;
  }
}

TEST(Fp16, KnownValues) {
  EXPECT_EQ(float_to_fp16(1.0f), 0x3c00);
  EXPECT_EQ(float_to_fp16(-2.0f), 0xc000);
  EXPECT_EQ(float_to_fp16(65504.0f), 0x7bff);
  EXPECT_EQ(float_to_fp16(65519.99f), 0x7bff);  // below the tie: largest finite
  EXPECT_EQ(float_to_fp16(65520.0f), 0x7c00);   // the tie rounds to even: infinity
  EXPECT_EQ(float_to_fp16(0x1p-24f), 0x0001);   // smallest subnormal
  EXPECT_EQ(float_to_fp16(0x1p-25f), 0x0000);   // half of it: tie to even (zero)
  EXPECT_EQ(float_to_fp16(0x1.8p-24f), 0x0002);  // 1.5 units: tie to even (2)
  EXPECT_EQ(float_to_fp16(-0x1p-26f), 0x8000);  // underflow keeps the sign
  EXPECT_EQ(float_to_fp16(0x1.ffcp-15f), 0x0400);  // 1023.5 units: the carry lands on 2^-14
  EXPECT_TRUE(std::isinf(round_to_fp16(std::numeric_limits<float>::infinity())));
  EXPECT_TRUE(std::isnan(round_to_fp16(bits_float(0x7f800001u))));
}

// Against the compiler's conversion over 2^26 float patterns spread over the whole range
// (stride 64, plus an offset so low mantissa bits vary), and densely around the tie points
// of the subnormal and overflow boundaries.
TEST(Fp16, MatchesCompilerConversion) {
  auto check = [](uint32_t u) {
    const float x = bits_float(u);
    const uint16_t want = f16_bits(static_cast<_Float16>(x));
    const uint16_t got = float_to_fp16(x);
    if (std::isnan(x)) return (got & 0x7c00u) == 0x7c00u && (got & 0x3ffu) != 0;
    return got == want;
  };
  size_t bad = 0;
  for (uint64_t u = 0; u < (uint64_t(1) << 32); u += 64) bad += !check(uint32_t(u + (u >> 12) % 64));
  for (uint32_t base : {0x33000000u, 0x33800000u, 0x38800000u, 0x477fe000u, 0x477ff000u})
    for (uint32_t d = 0; d < (1u << 16); ++d) {
      bad += !check(base - (1u << 15) + d);
      bad += !check((base - (1u << 15) + d) | 0x80000000u);
    }
  EXPECT_EQ(bad, 0u);
}

}  // namespace
}  // namespace lansbert::kern
