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
    std::vector<uint64_t> batch;
    std::vector<Sampler::Drawn> mb;
    for (int r = 0; r < world; ++r) {
      for (int m = 0; m < ranks[r].micro_batches_per_step(); ++m) {
        ranks[r].micro_batch_indices(pos, m, &mb);
        for (const Sampler::Drawn& d : mb) {
          EXPECT_EQ(d.epoch, pos.epoch);
          batch.push_back(d.index);
        }
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

// Blends: sources {37, 100, 5} samples at weights 1:2:1, global index [0,37) [37,137) [137,142).
std::shared_ptr<const BlendSchedule> blend_of(const std::vector<double>& w) {
  auto b = std::make_shared<BlendSchedule>();
  EXPECT_TRUE(BlendSchedule::create(w, "w", b.get()).is_ok());
  return b;
}

// The first `steps` global batches of a blend as `world` ranks read them, from `start`.
std::vector<Sampler::Drawn> blended_run(int world, int micro, DataPosition start, int steps) {
  const std::vector<uint64_t> sizes{37, 100, 5};
  const auto blend = blend_of({1, 2, 1});
  std::vector<Sampler> ranks(world);
  for (int r = 0; r < world; ++r)
    EXPECT_TRUE(Sampler::create_blended(sizes, blend, 9, 48, world, r, micro, &ranks[r]).is_ok());
  std::vector<Sampler::Drawn> out, mb;
  DataPosition pos = start;
  for (int step = 0; step < steps; ++step, pos = ranks[0].advance(pos))
    for (int r = 0; r < world; ++r)
      for (int m = 0; m < ranks[r].micro_batches_per_step(); ++m) {
        ranks[r].micro_batch_indices(pos, m, &mb);
        out.insert(out.end(), mb.begin(), mb.end());
      }
  return out;
}

TEST(BlendedSampler, EachSourceGoesThroughItsSamplesOnceAnEpochAtItsWeight) {
  const auto run = blended_run(1, 48, DataPosition{}, 40);  // 1920 samples: source 3 about 96 epochs
  const uint64_t begin[] = {0, 37, 137}, size[] = {37, 100, 5};
  const auto blend = blend_of({1, 2, 1});
  const BlendSchedule& b = *blend;
  std::vector<std::vector<uint64_t>> order(3);  // each source's samples in the order drawn
  for (uint64_t k = 0; k < run.size(); ++k) {
    const size_t s = b.pick(k).source;
    ASSERT_GE(run[k].index, begin[s]);
    ASSERT_LT(run[k].index, begin[s] + size[s]);
    ASSERT_EQ(run[k].epoch, order[s].size() / size[s]) << "the source's epoch keys the masks";
    order[s].push_back(run[k].index);
  }
  for (size_t s = 0; s < 3; ++s) {
    // Shares of the whole run as the weights say (bounded as blend.h says).
    EXPECT_NEAR(double(order[s].size()), run.size() * (s == 1 ? 0.5 : 0.25), 2.0) << s;
    std::vector<std::vector<uint64_t>> epochs;
    for (size_t e = 0; (e + 1) * size[s] <= order[s].size(); ++e) {
      std::vector<uint64_t> one(order[s].begin() + e * size[s], order[s].begin() + (e + 1) * size[s]);
      epochs.push_back(one);
      std::sort(one.begin(), one.end());
      for (uint64_t i = 0; i < size[s]; ++i) ASSERT_EQ(one[i], begin[s] + i) << "source " << s << " epoch " << e;
    }
    ASSERT_GE(epochs.size(), 2u) << s;
    if (size[s] > 5) {
      EXPECT_NE(epochs[0], epochs[1]) << "each epoch of a source is shuffled anew";
    }
  }
  // Sources of one size are not shuffled alike: two sources of 100 samples.
  std::vector<Sampler::Drawn> two;
  Sampler twin;
  ASSERT_TRUE(Sampler::create_blended({100, 100}, blend_of({1, 1}), 9, 100, 1, 0, 100, &twin).is_ok());
  twin.micro_batch_indices(DataPosition{}, 0, &two);
  std::vector<uint64_t> a, c;
  for (uint64_t k = 0; k < 100; ++k)
    (k % 2 == 0 ? a : c).push_back(two[k].index % 100);
  EXPECT_NE(a, c);
}

TEST(BlendedSampler, SameBatchesForAnyRankCountAndFromAnyResumedStep) {
  const auto full = blended_run(1, 48, DataPosition{}, 12);
  auto indices = [](const std::vector<Sampler::Drawn>& d) {
    std::vector<uint64_t> out;
    for (const auto& x : d) out.push_back(x.index * 1000 + x.epoch);
    return out;
  };
  for (int world : {2, 3, 8}) EXPECT_EQ(indices(blended_run(world, 2, DataPosition{}, 12)), indices(full)) << world;
  for (uint64_t g : {1u, 5u, 11u}) {
    const auto resumed = blended_run(4, 3, DataPosition{0, g * 48}, int(12 - g));
    EXPECT_TRUE(std::equal(resumed.begin(), resumed.end(), full.begin() + g * 48,
                           [](const auto& x, const auto& y) { return x.index == y.index && x.epoch == y.epoch; }))
        << g;
  }
}

TEST(BlendedSampler, PositionHasNoEpochAndBatchesMayExceedTheSamples) {
  Sampler s;
  // 48 sequences a batch from 42 samples: a blend repeats its sources.
  ASSERT_TRUE(Sampler::create_blended({37, 5}, blend_of({1, 1}), 1, 48, 2, 0, 4, &s).is_ok());
  EXPECT_TRUE(s.blended());
  EXPECT_EQ(s.batches_per_epoch(), 0u);
  DataPosition p;
  for (int i = 0; i < 5; ++i) p = s.advance(p);
  EXPECT_EQ(p, (DataPosition{0, 5 * 48}));
  EXPECT_TRUE(s.check(p).is_ok());
  EXPECT_FALSE(s.check(DataPosition{0, 50}).is_ok());
  const Status st = s.check(DataPosition{1, 0});  // a plain run's position
  EXPECT_NE(st.message().find("without data.weights"), std::string::npos) << st.message();
  EXPECT_FALSE(Sampler::create_blended({37, 0}, blend_of({1, 1}), 1, 48, 2, 0, 4, &s).is_ok());
  EXPECT_FALSE(Sampler::create_blended({37}, blend_of({1, 1}), 1, 48, 2, 0, 4, &s).is_ok());
  EXPECT_FALSE(Sampler::create_blended({37, 5}, nullptr, 1, 48, 2, 0, 4, &s).is_ok());
  EXPECT_FALSE(Sampler::create_blended({37, 5}, blend_of({1, 1}), 1, 50, 2, 0, 4, &s).is_ok());  // 50 % 8
}

}  // namespace
}  // namespace lansbert
