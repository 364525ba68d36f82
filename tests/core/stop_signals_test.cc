// StopSignals (core/stop_signals.h): while a guard lives, SIGINT, SIGTERM and SIGUSR1 are
// recorded instead of ending the process, the first one is kept (mpirun's SIGTERM after a
// wrapper died of a SIGUSR1 must not rename the stop), a new guard starts clean, and the
// previous actions come back when it ends.
#include "lansbert/core/stop_signals.h"

#include <gtest/gtest.h>

#include <csignal>

namespace lansbert {
namespace {

// The action installed for `sig` now (a handler address, SIG_DFL or SIG_IGN).
void (*action_of(int sig))(int) {
  struct sigaction now = {};
  sigaction(sig, nullptr, &now);
  return now.sa_handler;
}

TEST(StopSignals, EachStopSignalIsRecordedAndTheFirstKept) {
  for (int sig : {SIGINT, SIGTERM, SIGUSR1}) {
    const StopSignals guard;
    EXPECT_EQ(stop_signal(), 0) << "a new guard starts clean";
    ASSERT_EQ(raise(sig), 0);  // would end the test program without the guard
    EXPECT_EQ(stop_signal(), sig) << signal_name(sig);
    ASSERT_EQ(raise(sig == SIGTERM ? SIGUSR1 : SIGTERM), 0);
    EXPECT_EQ(stop_signal(), sig) << "a second signal replaced the first, " << signal_name(sig);
  }
  EXPECT_STREQ(signal_name(SIGUSR1), "SIGUSR1");
  EXPECT_STREQ(signal_name(SIGTERM), "SIGTERM");
  EXPECT_STREQ(signal_name(SIGINT), "SIGINT");
}

TEST(StopSignals, TheEarlierActionsComeBack) {
  const auto before_int = action_of(SIGINT), before_term = action_of(SIGTERM), before_usr1 = action_of(SIGUSR1);
  {
    const StopSignals guard;
    EXPECT_NE(action_of(SIGUSR1), before_usr1);
    EXPECT_NE(action_of(SIGTERM), before_term);
  }
  EXPECT_EQ(action_of(SIGINT), before_int);
  EXPECT_EQ(action_of(SIGTERM), before_term);
  EXPECT_EQ(action_of(SIGUSR1), before_usr1);
  {
    const StopSignals off(false);  // a library caller's no-op guard changes nothing
    EXPECT_EQ(action_of(SIGUSR1), before_usr1);
  }
}

}  // namespace
}  // namespace lansbert
