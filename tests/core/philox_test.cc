// Philox4x32-10 against the known-answer vectors published with Random123
// (kat_vectors: counter[4] key[2] -> output[4]).
#include <gtest/gtest.h>

#include "lansbert/core/philox.h"

namespace lansbert {
namespace {

struct Kat {
  uint32_t ctr[4], key[2], out[4];
};

TEST(Philox, Random123KnownAnswers) {
  const Kat kats[] = {
      {{0, 0, 0, 0}, {0, 0}, {0x6627e8d5, 0xe169c58d, 0xbc57ac4c, 0x9b00dbd8}},
      {{0xffffffff, 0xffffffff, 0xffffffff, 0xffffffff},
       {0xffffffff, 0xffffffff},
       {0x408f276d, 0x41c83b0e, 0xa20bc7c6, 0x6d5451fd}},
      {{0x243f6a88, 0x85a308d3, 0x13198a2e, 0x03707344},
       {0xa4093822, 0x299f31d0},
       {0xd16cfe09, 0x94fdcceb, 0x5001e420, 0x24126ea1}},
  };
  for (const Kat& k : kats) {
    Philox4x32 c{{k.ctr[0], k.ctr[1], k.ctr[2], k.ctr[3]}};
    Philox4x32 r = philox4x32_10(c, k.key[0], k.key[1]);
    for (int i = 0; i < 4; ++i) EXPECT_EQ(r.v[i], k.out[i]) << "word " << i;
  }
}

TEST(Philox, StreamsDifferBySiteStepAndSeed) {
  RngKey a{42, 7, 3};
  RngKey b = a;
  b.site = 4;
  RngKey c = a;
  c.step = 8;
  RngKey d = a;
  d.seed = 43;
  int same_b = 0, same_c = 0, same_d = 0;
  for (uint64_t e = 0; e < 64; ++e) {
    same_b += philox_bits(a, e) == philox_bits(b, e);
    same_c += philox_bits(a, e) == philox_bits(c, e);
    same_d += philox_bits(a, e) == philox_bits(d, e);
  }
  EXPECT_LT(same_b, 2);
  EXPECT_LT(same_c, 2);
  EXPECT_LT(same_d, 2);
}

TEST(Philox, UniformIsInUnitIntervalAndUnbiased) {
  RngKey k{1, 0, 0};
  double sum = 0;
  const int n = 1 << 16;
  for (int e = 0; e < n; ++e) {
    float u = uniform01(philox_bits(k, e));
    ASSERT_GE(u, 0.0f);
    ASSERT_LT(u, 1.0f);
    sum += u;
  }
  // Mean of n uniforms has sd 1/sqrt(12 n) ~ 0.00113; allow 5 sd.
  EXPECT_NEAR(sum / n, 0.5, 0.0057);
}

}  // namespace
}  // namespace lansbert
