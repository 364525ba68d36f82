// The 16-bit gradient wire's math (kernels/grad_wire.h): what a rank sends and how two wire
// values add. fp16 sums are checked against the compiler's IEEE binary16 addition
// (_Float16); bf16 sums on hand-worked cases.
#include "lansbert/kernels/grad_wire.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>

#include "f16_bits.h"

namespace lansbert::kern {
namespace {

using testing::bits_to_f16;
using testing::f16_bits;

TEST(GradWire, AverageIsScaledBeforeRounding) {
  // 100000 overflows fp16 (largest finite 65504), a quarter of it does not: an average over
  // four ranks of loss-scaled gradients stays finite where a sum divided afterwards would not.
  EXPECT_TRUE(std::isinf(half_to_float(grad_to_wire(100000.f, 1.f, HalfFormat::kFp16), HalfFormat::kFp16)));
  EXPECT_EQ(half_to_float(grad_to_wire(100000.f, 0.25f, HalfFormat::kFp16), HalfFormat::kFp16), 24992.f);  // a tie: to even
  EXPECT_EQ(half_to_float(grad_to_wire(100000.f, 0.25f, HalfFormat::kBf16), HalfFormat::kBf16), 24960.f);
  // Rounding to nearest, ties to even, after the scale: 3 * 2^-9 is not a bf16 value at 1.
  EXPECT_EQ(half_to_float(grad_to_wire(2.f + 3.f / 256.f, 0.5f, HalfFormat::kBf16), HalfFormat::kBf16),
            1.f + 1.f / 128.f);
}

TEST(GradWire, Bf16SumRoundsToNearestEven) {
  const auto b = [](float x) { return float_to_bf16(x); };
  const auto sum = [&](float x, float y) { return bf16_to_float(wire_add(b(x), b(y), HalfFormat::kBf16)); };
  EXPECT_EQ(sum(1.f, 1.f / 128.f), 1.f + 1.f / 128.f);   // exact
  EXPECT_EQ(sum(1.f, 1.f / 256.f), 1.f);                 // tie: to the even 1
  EXPECT_EQ(sum(1.f + 1.f / 128.f, 1.f / 256.f), 1.f + 2.f / 128.f);  // tie: to the even 1+2^-6
  EXPECT_EQ(sum(1.f, 3.f / 512.f), 1.f + 1.f / 128.f);   // above the tie
  EXPECT_EQ(sum(256.f, 1.f), 256.f);                     // tie (the ulp is 2): to the even 256
  EXPECT_EQ(sum(3.f, -3.f), 0.f);
  EXPECT_TRUE(std::isinf(sum(3e38f, 3e38f)));
  EXPECT_TRUE(std::isnan(sum(INFINITY, -INFINITY)));
}

TEST(GradWire, Fp16SumIsIeeeBinary16Addition) {
  std::mt19937 g(11);
  std::uniform_int_distribution<uint32_t> bits(0, 0xffff);
  int checked = 0;
  for (int i = 0; i < 200000; ++i) {
    const uint16_t a = static_cast<uint16_t>(bits(g)), c = static_cast<uint16_t>(bits(g));
    const _Float16 want = bits_to_f16(a) + bits_to_f16(c);
    const uint16_t got = wire_add(a, c, HalfFormat::kFp16);
    if (std::isnan(float(want))) {
      EXPECT_TRUE(std::isnan(fp16_to_float(got)));
      continue;
    }
    ASSERT_EQ(got, f16_bits(want)) << fp16_to_float(a) << " + " << fp16_to_float(c);
    ++checked;
  }
  EXPECT_GT(checked, 180000);  // about 6% of the pairs hold a NaN
  EXPECT_EQ(wire_add(float_to_fp16(2.f), float_to_fp16(3.f), HalfFormat::kFp16), wire_add(float_to_fp16(3.f), float_to_fp16(2.f), HalfFormat::kFp16));
}

}  // namespace
}  // namespace lansbert::kern
