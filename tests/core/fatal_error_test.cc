// fatal_error's one line: the rank and host inside a job, the host alone before a rank is set;
// abort_job's, for errors that are no program bug.
#include <gtest/gtest.h>

#include <new>
#include <stdexcept>
#include <thread>

#include "lansbert/core/allocator.h"
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

// abort_job: a user's error that ends a job, named as `lansbert: error` with the rank and
// host, without a source location (it is no program bug); outside a job (no abort hook) the
// process exits with the error's code.
TEST(FatalErrorDeathTest, AbortJobNamesTheRankAndTheErrorWithoutASourceLocation) {
  testing::FLAGS_gtest_death_test_style = "threadsafe";
  EXPECT_EXIT(
      {
        set_fatal_rank(1);
        abort_job("not found: missing.yaml", 3);
      },
      testing::ExitedWithCode(3), R"(lansbert: error \[rank 1 on [^]]+\]: not found: missing\.yaml)");
}

// A host allocation that fails is out of memory (exit 5), not a program bug's fatal line.
TEST(FatalErrorDeathTest, AFailedHostAllocationIsOutOfMemory) {
  testing::FLAGS_gtest_death_test_style = "threadsafe";
  const size_t too_many = size_t(1) << 62;  // past any address space
  EXPECT_EXIT(host_allocator().allocate(too_many), testing::ExitedWithCode(5),
              "lansbert: error \\[[^]]+\\]: out of memory: a host allocation of " + std::to_string(too_many) +
                  " bytes failed");
}

// An exception nothing catches: out of memory is exit 5 with a message saying so (not
// "terminate called after throwing an instance of 'std::bad_alloc'" and SIGABRT); any other
// is an internal error (70) with its what().
TEST(FatalErrorDeathTest, UncaughtExceptionsEndWithAMessageAndAnExitCode) {
  testing::FLAGS_gtest_death_test_style = "threadsafe";
  EXPECT_EXIT(
      {
        install_uncaught_exception_handler();
        std::thread([] { throw std::bad_alloc(); }).join();  // where nothing catches (gtest would)
      },
      testing::ExitedWithCode(5), R"(lansbert: error \[[^]]+\]: out of memory: an allocation failed)");
  EXPECT_EXIT(
      {
        install_uncaught_exception_handler();
        std::thread([] { throw std::runtime_error("stoi"); }).join();
      },
      testing::ExitedWithCode(70), R"(lansbert: error \[[^]]+\]: internal error: an exception nothing caught: stoi)");
}

}  // namespace
}  // namespace lansbert
