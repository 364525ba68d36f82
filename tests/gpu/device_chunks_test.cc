// DeviceChunkPlan (cuda/device_chunks.h), the chunking the device optimizer and the device
// loss-scale check share: host code, so it runs without a device. Over a range cut inside
// blocks, every element of the range is in exactly one chunk of its own block, chunks are at
// most kDeviceChunk long, `state` counts from the range's start, and a plan is reused only
// for the same table and range.
#include <gtest/gtest.h>

#include <vector>

#include "device_chunks.h"

namespace lansbert {
namespace {

TEST(DeviceChunkPlan, CoversTheRangeOnceBlockByBlock) {
  ParamTable t;
  t.add("emb", {300, 129}, ParamRole::kEmbedding);  // 38700: three chunks when whole
  t.add("w", {7}, ParamRole::kWeight);
  t.add("b", {40000}, ParamRole::kBias);
  for (const auto& [begin, end] : {std::pair<size_t, size_t>{0, t.total_elements()},
                                   {t[0].offset + 20000, t[2].offset + 17000},
                                   {t[1].offset + 2, t[1].offset + 2}}) {
    cuda::DeviceChunkPlan plan;
    EXPECT_FALSE(plan.matches(t, begin, end));
    std::vector<cuda::DevChunk> chunks;
    std::vector<int> first;
    plan.cut(t, begin, end, &chunks, &first);
    EXPECT_TRUE(plan.matches(t, begin, end));
    EXPECT_FALSE(plan.matches(t, begin, end + 1));
    ASSERT_EQ(first.size(), t.size() + 1);
    EXPECT_EQ(first.back(), int(chunks.size()));
    std::vector<int> owner(t.total_elements(), -1);
    for (size_t c = 0; c < chunks.size(); ++c) {
      const cuda::DevChunk& ch = chunks[c];
      ASSERT_LT(ch.begin, ch.end);
      ASSERT_LE(ch.end - ch.begin, cuda::kDeviceChunk);
      EXPECT_GE(int(c), first[ch.block]);
      EXPECT_LT(int(c), first[ch.block + 1]);
      EXPECT_EQ(ch.state, ch.begin - begin);
      for (size_t i = ch.begin; i < ch.end; ++i) {
        ASSERT_EQ(owner[i], -1) << "element " << i << " in two chunks";
        owner[i] = ch.block;
      }
    }
    for (size_t b = 0; b < t.size(); ++b)
      for (size_t i = t[b].offset; i < t[b].offset + t[b].numel; ++i)
        EXPECT_EQ(owner[i], (i >= begin && i < end) ? int(b) : -1) << "element " << i;
  }
}

}  // namespace
}  // namespace lansbert
