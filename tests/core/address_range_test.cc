// AddressRange and Arena::take_key: addresses with no memory behind them, and any access a
// fault.
#include "lansbert/core/address_range.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <vector>

#include "lansbert/core/arena.h"

namespace lansbert {
namespace {

TEST(AddressRange, ReservesDistinctRanges) {
  AddressRange a(1 << 20), b(1 << 20);
  ASSERT_NE(a.data(), nullptr);
  ASSERT_NE(b.data(), nullptr);
  EXPECT_EQ(a.size(), size_t(1) << 20);
  const uintptr_t pa = reinterpret_cast<uintptr_t>(a.data()), pb = reinterpret_cast<uintptr_t>(b.data());
  EXPECT_TRUE(pa + a.size() <= pb || pb + b.size() <= pa);
  AddressRange moved = std::move(a);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(moved.data()), pa);
  EXPECT_EQ(a.data(), nullptr);
  EXPECT_EQ(AddressRange(0).data(), nullptr);
}

// Larger than this machine's memory: reserving costs no memory.
TEST(AddressRange, CostsNoMemory) {
  AddressRange big(size_t(1) << 40);
  EXPECT_NE(big.data(), nullptr);
}

TEST(AddressRangeDeathTest, ReadingFaults) {
  AddressRange r(4096);
  volatile const float* p = reinterpret_cast<const float*>(r.data());
  EXPECT_DEATH(
      {
        const float x = p[7];
        std::printf("%f\n", x);
      },
      "");
}

TEST(Arena, KeysComeFromTheirRangeAndAreCountedApart) {
  Arena counting;
  EXPECT_EQ(counting.take<float>(100), nullptr);
  EXPECT_EQ(counting.take_key<float>(1000), nullptr);
  EXPECT_EQ(counting.take_key<float>(10), nullptr);
  EXPECT_EQ(counting.required(), 400 + Arena::kAlign);
  EXPECT_EQ(counting.key_required(), 4096 + 40 + Arena::kAlign);  // 4000 rounded up to 256, then 40

  std::vector<char> memory(counting.required());
  AddressRange keys(counting.key_required());
  Arena real(memory.data(), memory.size(), keys.data(), keys.size());
  float* x = real.take<float>(100);
  float* k1 = real.take_key<float>(1000);
  float* k2 = real.take_key<float>(10);
  EXPECT_GE(reinterpret_cast<char*>(x), memory.data());
  EXPECT_EQ(reinterpret_cast<char*>(k1), keys.data());
  EXPECT_EQ(reinterpret_cast<char*>(k2), keys.data() + 4096);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(k2) % Arena::kAlign, 0u);
  EXPECT_EQ(Arena().key_required(), 0u);
}

TEST(ArenaDeathTest, KeysBeyondTheRangeOverflow) {
  std::vector<char> memory(1024);
  AddressRange keys(4096);
  Arena real(memory.data(), memory.size(), keys.data(), keys.size());
  EXPECT_DEATH(real.take_key<float>(2000), "key addresses overflow");
  Arena no_keys(memory.data(), memory.size());
  EXPECT_DEATH(no_keys.take_key<float>(1), "key addresses overflow");
}

}  // namespace
}  // namespace lansbert
