// kern::DropoutBits, the GPU kernels' cache of one Philox block: whatever order a thread asks
// for elements in (runs of four aligned or not, going back, jumping across blocks), it
// returns philox_bits(key, e), so the kernels that use it draw the CPU's masks.
#include <gtest/gtest.h>

#include <cstdint>
#include <random>
#include <vector>

#include "lansbert/kernels/dropout.h"

namespace lansbert {
namespace {

TEST(DropoutBits, EqualsPhiloxBitsInAnyOrder) {
  const RngKey key{0x1234567890abcdefull, 7, 3};
  std::vector<uint64_t> order;
  for (uint64_t e = 0; e < 64; ++e) order.push_back(e);                // runs of four, aligned
  for (uint64_t j0 = 4 * 5; j0 < 130; j0 += 4 * 32)                    // a softmax lane, row base 37
    for (uint64_t j = j0; j < j0 + 4 && j < 130; ++j) order.push_back(37 * 130 + j);
  for (uint64_t e : {9ull, 8ull, 7ull, 8ull, 3ull, 1ull << 33, (1ull << 33) + 1, 2ull}) order.push_back(e);
  std::mt19937_64 rng(5);
  for (int i = 0; i < 1000; ++i) order.push_back(rng() % 100000);
  kern::DropoutBits bits(key);
  for (uint64_t e : order) ASSERT_EQ(bits(e), philox_bits(key, e)) << "element " << e;
}

TEST(DropoutBits, ScaleWithItsBitsIsDropoutApply) {
  const RngKey key{99, 1, 2};
  kern::DropoutBits bits(key);
  for (uint64_t e = 1000; e < 1200; ++e) {
    const float x = 0.25f + float(e % 7);
    EXPECT_EQ(kern::dropout_scale(x, bits(e), 0.3f), kern::dropout_apply(x, key, e, 0.3f)) << e;
  }
}

}  // namespace
}  // namespace lansbert
