// The pieces the GPU's dropout kernels are built from, run on the CPU: kern::DropoutBits (a
// thread's cache of one Philox block) returns philox_bits(key, e) in any order of e;
// for_dropout_block and for_lane_runs visit every element exactly once. So the kernels
// draw the CPU's masks and cover their tensors.
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
  // Philox blocks past 2^32 (element 2^33 is block 2^31): the counter's high word is nonzero.
  for (uint64_t e = (1ull << 34) + 2; e < (1ull << 34) + 11; ++e) order.push_back(e);
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

// The GPU's element-wise dropout: one thread per Philox block. Over all blocks every element
// below n is visited once, with its own bits, and nothing at or past n.
TEST(DropoutBits, BlocksVisitEveryElementOnceWithItsBits) {
  const RngKey key{77, 4, 9};
  for (uint64_t n : {0ull, 1ull, 3ull, 4ull, 5ull, 1001ull}) {
    std::vector<int> seen(n, 0);
    for (uint64_t b = 0; b < (n + 3) / 4; ++b)
      kern::for_dropout_block(key, b, n, [&](uint64_t i, uint32_t bits) {
        ASSERT_LT(i, n);
        EXPECT_EQ(bits, philox_bits(key, i)) << i;
        ++seen[i];
      });
    for (uint64_t i = 0; i < n; ++i) EXPECT_EQ(seen[i], 1) << "n " << n << " element " << i;
  }
  // A block past 2^32 (the counter's high word) and the last, partial block of such a tensor.
  const uint64_t big = (1ull << 34) + 6;
  for (const uint64_t b : {uint64_t(1ull << 32), big / 4}) {  // full, then 2 of 4
    int visited = 0;
    kern::for_dropout_block(key, b, big, [&](uint64_t i, uint32_t bits) {
      EXPECT_EQ(i / 4, b);
      ASSERT_LT(i, big);
      EXPECT_EQ(bits, philox_bits(key, i)) << i;
      ++visited;
    });
    EXPECT_EQ(visited, b == big / 4 ? 2 : 4) << "block " << b;
  }
}

// The softmax kernels' lanes: over the 32 lanes every key of a row is owned once, each lane's
// keys come in increasing order and in runs of up to four consecutive keys.
TEST(DropoutBits, LaneRunsPartitionARow) {
  for (int n : {0, 1, 4, 31, 45, 127, 128, 129, 200, 512, 513}) {
    std::vector<int> owner(n, -1);
    for (int lane = 0; lane < 32; ++lane) {
      int last = -1;
      kern::for_lane_runs(lane, n, [&](int j) {
        ASSERT_GE(j, 0);
        ASSERT_LT(j, n);
        EXPECT_EQ(owner[j], -1) << "key " << j << " owned twice";
        owner[j] = lane;
        EXPECT_GT(j, last);
        EXPECT_EQ((j % 128) / 4, lane) << j;
        last = j;
      });
    }
    for (int j = 0; j < n; ++j) EXPECT_NE(owner[j], -1) << "n " << n << " key " << j;
  }
}

}  // namespace
}  // namespace lansbert
