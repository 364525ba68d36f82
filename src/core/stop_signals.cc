// StopSignals and the reset of library-installed handlers (stop_signals.h).
#include "lansbert/core/stop_signals.h"

#include <atomic>

namespace lansbert {
namespace {

std::atomic<int> g_stop_signal{0};
static_assert(std::atomic<int>::is_always_lock_free, "read from a signal handler");

extern "C" void record_stop_signal(int sig) { g_stop_signal.store(sig); }

}  // namespace

void restore_default_signal_actions() {
  for (int sig : {SIGINT, SIGTERM, SIGSEGV, SIGBUS, SIGILL, SIGABRT}) {
    struct sigaction now = {};
    if (sigaction(sig, nullptr, &now) != 0) continue;
    const bool ignored = !(now.sa_flags & SA_SIGINFO) && now.sa_handler == SIG_IGN;
    if (ignored) continue;
    struct sigaction dfl = {};
    dfl.sa_handler = SIG_DFL;
    sigemptyset(&dfl.sa_mask);
    sigaction(sig, &dfl, nullptr);
  }
}

StopSignals::StopSignals(bool on) : on_(on) {
  g_stop_signal.store(0);
  if (!on_) return;
  struct sigaction sa = {};
  sa.sa_handler = record_stop_signal;
  sigemptyset(&sa.sa_mask);
  // No SA_RESTART: a read blocked on a pipe returns EINTR, and the caller sees the stop.
  sigaction(SIGINT, &sa, &old_int_);
  sigaction(SIGTERM, &sa, &old_term_);
}

StopSignals::~StopSignals() {
  if (!on_) return;
  sigaction(SIGINT, &old_int_, nullptr);
  sigaction(SIGTERM, &old_term_, nullptr);
}

int stop_signal() { return g_stop_signal.load(); }

const char* signal_name(int sig) {
  switch (sig) {
    case SIGINT: return "SIGINT";
    case SIGTERM: return "SIGTERM";
    default: return "a signal";
  }
}

}  // namespace lansbert
