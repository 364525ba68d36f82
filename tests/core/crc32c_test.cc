// CRC32C against the published check value and across the hardware/table split points.
#include "lansbert/core/crc32c.h"

#include <gtest/gtest.h>

#include <string>

namespace lansbert {
namespace {

TEST(Crc32c, KnownValues) {
  EXPECT_EQ(crc32c("123456789", 9), 0xE3069283u);  // the standard check value
  EXPECT_EQ(crc32c("", 0), 0u);
  const std::string s(1000, 'x');
  EXPECT_EQ(crc32c(s.data() + 7, 993), crc32c(s.data() + 107, 893, crc32c(s.data() + 7, 100)));
}

}  // namespace
}  // namespace lansbert
