// fatal_error's one line: the rank and host inside a job, the host alone before a rank is set.
#include <gtest/gtest.h>

#include "lansbert/core/check.h"

namespace lansbert {
namespace {

TEST(FatalErrorDeathTest, NamesTheHostAloneBeforeARankIsSet) {
  testing::FLAGS_gtest_death_test_style = "threadsafe";
  EXPECT_DEATH(fatal_error("f.cc", 7, "x > 0", "why"), R"(lansbert fatal \[[^] ]+\] f\.cc:7: x > 0: why)");
}

TEST(FatalErrorDeathTest, NamesTheRankAndHostInAJob) {
  testing::FLAGS_gtest_death_test_style = "threadsafe";
  EXPECT_DEATH(
      {
        set_fatal_rank(3);
        fatal_error("g.cc", 9, "ok", "");
      },
      R"(lansbert fatal \[rank 3 on [^]]+\] g\.cc:9: ok)");
}

}  // namespace
}  // namespace lansbert
