// FlatBuffers::half_params: every CPU rule writes the 16-bit copy of each parameter it updates
// (the twin of the device kernels' write), changes nothing else, leaves the gaps between
// tensors alone, and in a sharded update writes its slice only.
#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <vector>

#include "lansbert/kernels/half.h"
#include "optim_test_util.h"

namespace lansbert {
namespace {

constexpr uint16_t kUnwritten = 0xBEEF;  // a sentinel no test weight rounds to

ParamTable table_with_gaps() {
  ParamTable t;
  t.add("w", {37, 41}, ParamRole::kWeight);  // several chunks
  t.add("b", {41}, ParamRole::kBias);
  t.add("gamma", {19}, ParamRole::kLayerNormGamma);
  return t;
}

void fill(const ParamTable& t, testing::Flat* f) {
  for (size_t b = 0; b < t.size(); ++b)
    for (size_t i = 0; i < t[b].numel; ++i) {
      f->p[t[b].offset + i] = 0.01f * float((i * 37 + b * 11) % 23) - 0.1f;
      f->g[t[b].offset + i] = 0.003f * float((i * 13 + b * 5) % 17) - 0.02f;
    }
}

bool in_a_tensor(const ParamTable& t, size_t i) {
  for (const ParamEntry& e : t.entries())
    if (i >= e.offset && i < e.offset + e.numel) return true;
  return false;
}

TEST(HalfCopy, EveryRuleWritesTheCopyOfWhatItUpdated) {
  const ParamTable t = table_with_gaps();
  ASSERT_GT(t.total_elements(), t.parameter_count()) << "the test wants gaps between tensors";
  for (const std::string& name : optimizer_names()) {
    for (kern::HalfFormat fmt : {kern::HalfFormat::kBf16, kern::HalfFormat::kFp16}) {
      std::unique_ptr<Optimizer> with, without;
      ASSERT_TRUE(make_optimizer(name, OptimizerConfig{}, &with).is_ok());
      ASSERT_TRUE(make_optimizer(name, OptimizerConfig{}, &without).is_ok());
      testing::Flat a(t), b(t);
      fill(t, &a);
      fill(t, &b);
      std::vector<uint16_t> half(t.total_elements(), kUnwritten);
      for (int step = 1; step <= 2; ++step) {
        FlatBuffers buf = a.buffers();
        buf.half_params = half.data();
        buf.half_format = fmt;
        with->update(t, buf, step, 1e-2, nullptr);
        without->update(t, b.buffers(), step, 1e-2, nullptr);
      }
      EXPECT_EQ(a.p, b.p) << name << ": the copy changed the update";
      EXPECT_EQ(a.m, b.m) << name;
      size_t wrong = 0, gap_written = 0;
      for (size_t i = 0; i < half.size(); ++i) {
        if (in_a_tensor(t, i))
          wrong += half[i] != kern::float_to_half(a.p[i], fmt);
        else
          gap_written += half[i] != kUnwritten;
      }
      EXPECT_EQ(wrong, 0u) << name;
      EXPECT_EQ(gap_written, 0u) << name;
    }
  }
}

TEST(HalfCopy, ShardedUpdateWritesItsSliceOnly) {
  const ParamTable t = table_with_gaps();
  ShardSpec shard;
  shard.begin = t[0].offset + 500;  // inside "w"
  shard.end = t[1].offset + 20;     // inside "b"
  shard.reduce_sums = [](double*, size_t) {};  // one rank standing in for several
  for (const std::string& name : optimizer_names()) {
    std::unique_ptr<Optimizer> opt;
    ASSERT_TRUE(make_optimizer(name, OptimizerConfig{}, &opt).is_ok());
    opt->set_shard(shard);
    testing::Flat f(t);
    fill(t, &f);
    std::vector<uint16_t> half(t.total_elements(), kUnwritten);
    FlatBuffers buf = f.buffers();
    buf.half_params = half.data();
    opt->update(t, buf, 1, 1e-2, nullptr);
    size_t wrong = 0, outside = 0;
    for (size_t i = 0; i < half.size(); ++i) {
      if (i >= shard.begin && i < shard.end && in_a_tensor(t, i))
        wrong += half[i] != kern::float_to_bf16(f.p[i]);
      else
        outside += half[i] != kUnwritten;
    }
    EXPECT_EQ(wrong, 0u) << name;
    EXPECT_EQ(outside, 0u) << name;
  }
}

}  // namespace
}  // namespace lansbert
