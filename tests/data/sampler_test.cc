// Sampler: a bijection; one epoch covers every sample once with disjoint rank shares for
// 1, 2, 3 and 8 ranks; resuming anywhere, with any rank count, sees the same global batches.
#include "lansbert/data/sampler.h"

#include <gtest/gtest.h>

#include <algorithm>

namespace lansbert {
namespace {

TEST(Feistel, IsABijection) {
  for (uint64_t n : {1ull, 2ull, 3ull, 17ull, 1000ull, 4096ull, 4097ull, 100003ull}) {
    FeistelPermutation p(n, 42, 3);
    std::vector<bool> seen(n, false);
    for (uint64_t i = 0; i < n; ++i) {
      const uint64_t v = p(i);
      ASSERT_LT(v, n);
      ASSERT_FALSE(seen[v]) << "n=" << n;
      seen[v] = true;
    }
  }
  // Epochs differ; the identity is not what we get.
  FeistelPermutation a(1000, 42, 0), b(1000, 42, 1);
  int same = 0, fixed = 0;
  for (uint64_t i = 0; i < 1000; ++i) {
    same += a(i) == b(i);
    fixed += a(i) == i;
  }
  EXPECT_LT(same, 20);
  EXPECT_LT(fixed, 20);
}

// All global batches of one epoch as seen by `world` ranks: batch -> samples in rank order.
std::vector<std::vector<uint64_t>> epoch_batches(uint64_t n, int64_t G, int world, int micro,
                                                 DataPosition start) {
  std::vector<Sampler> ranks(world);
  for (int r = 0; r < world; ++r) EXPECT_TRUE(Sampler::create(n, 5, G, world, r, micro, &ranks[r]).is_ok());
  std::vector<std::vector<uint64_t>> out;
  for (DataPosition pos = start; pos.epoch == start.epoch; pos = ranks[0].advance(pos)) {
    std::vector<uint64_t> batch, mb;
    for (int r = 0; r < world; ++r) {
      for (int m = 0; m < ranks[r].micro_batches_per_step(); ++m) {
        ranks[r].micro_batch_indices(pos, m, &mb);
        batch.insert(batch.end(), mb.begin(), mb.end());
      }
    }
    out.push_back(batch);
  }
  return out;
}

TEST(Sampler, EpochCoversEverySampleOnceForAnyWorld) {
  const uint64_t n = 24 * 50;
  for (int world : {1, 2, 3, 8}) {
    const auto batches = epoch_batches(n, 48, world, 2, DataPosition{1, 0});
    ASSERT_EQ(batches.size(), n / 48) << world;
    std::vector<int> hits(n, 0);
    for (const auto& b : batches) for (uint64_t s : b) ++hits[s];
    EXPECT_TRUE(std::all_of(hits.begin(), hits.end(), [](int h) { return h == 1; })) << world;
    // The same global batches whatever the rank count.
    EXPECT_EQ(batches, epoch_batches(n, 48, 1, 48, DataPosition{1, 0})) << world;
  }
}

TEST(Sampler, DropsTheLastPartialBatchAndMovesToNextEpoch) {
  Sampler s;
  ASSERT_TRUE(Sampler::create(100, 1, 32, 2, 0, 4, &s).is_ok());
  EXPECT_EQ(s.batches_per_epoch(), 3u);
  DataPosition p;
  p = s.advance(s.advance(p));
  EXPECT_EQ(p, (DataPosition{0, 64}));
  EXPECT_EQ(s.advance(p), (DataPosition{1, 0}));
  EXPECT_FALSE(s.check(DataPosition{0, 96}).is_ok());
  EXPECT_FALSE(s.check(DataPosition{0, 5}).is_ok());
}

TEST(Sampler, ResumeWithAnyRankCountContinuesTheSameSequence) {
  const uint64_t n = 960;
  const auto full = epoch_batches(n, 24, 2, 3, DataPosition{0, 0});
  for (uint64_t g : {0u, 1u, 7u, 39u}) {
    for (int world : {1, 3, 8}) {
      const auto resumed = epoch_batches(n, 24, world, 1, DataPosition{0, g * 24});
      ASSERT_EQ(resumed.size(), full.size() - g);
      EXPECT_TRUE(std::equal(resumed.begin(), resumed.end(), full.begin() + g)) << g << " " << world;
    }
  }
}

TEST(Sampler, RejectsImpossibleSplits) {
  Sampler s;
  EXPECT_EQ(Sampler::create(100, 1, 30, 4, 0, 2, &s).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(Sampler::create(10, 1, 16, 1, 0, 2, &s).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(Sampler::create(100, 1, 16, 2, 2, 2, &s).code(), StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace lansbert
