// Which device a rank binds (device_for_rank): its local rank when every GPU of the host is
// visible to every rank, device 0 when the scheduler shows each rank only its own, a refusal
// naming the counts when a host runs more ranks than the devices each sees.
#include "lansbert/train/device_ranks.h"

#include <gtest/gtest.h>

namespace lansbert {
namespace {

TEST(DeviceForRank, LocalRankWhenEveryDeviceIsVisible) {
  for (int r = 0; r < 8; ++r) {
    int index = -1;
    ASSERT_TRUE(device_for_rank(r, 8, 8, &index).is_ok());
    EXPECT_EQ(index, r);
  }
}

TEST(DeviceForRank, DeviceZeroWhenEachRankSeesOne) {
  for (int r = 0; r < 8; ++r) {
    int index = -1;
    ASSERT_TRUE(device_for_rank(r, 8, 1, &index).is_ok());
    EXPECT_EQ(index, 0);
  }
}

TEST(DeviceForRank, TooFewDevicesOrNoneAreRefused) {
  int index = -1;
  const Status few = device_for_rank(3, 4, 2, &index);
  EXPECT_EQ(few.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(few.message().find("4 ranks on this host but only 2 visible devices"), std::string::npos)
      << few.message();
  EXPECT_EQ(device_for_rank(0, 1, 0, &index).code(), StatusCode::kUnsupported);
}

}  // namespace
}  // namespace lansbert
