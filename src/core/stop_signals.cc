// StopSignals and the reset of library-installed handlers (stop_signals.h).
#include "lansbert/core/stop_signals.h"

#include <dlfcn.h>

#include <atomic>
#include <cstring>

namespace lansbert {
namespace {

std::atomic<int> g_stop_signal{0};
static_assert(std::atomic<int>::is_always_lock_free, "read from a signal handler");

// The first signal is kept: a second (mpirun's SIGTERM after a wrapper died of the first) must
// not rename the stop.
extern "C" void record_stop_signal(int sig) {
  int none = 0;
  g_stop_signal.compare_exchange_strong(none, sig);
}

// Whether `handler` lives in libinfinipath (the library whose load-time handlers we undo);
// a sanitizer's or crash reporter's handlers stay.
bool from_infinipath(const void* handler) {
  Dl_info info = {};
  return dladdr(handler, &info) != 0 && info.dli_fname != nullptr &&
         std::strstr(info.dli_fname, "libinfinipath") != nullptr;
}

}  // namespace

void restore_default_signal_actions() {
  for (int sig : {SIGINT, SIGTERM, SIGSEGV, SIGBUS, SIGILL, SIGABRT}) {
    struct sigaction now = {};
    if (sigaction(sig, nullptr, &now) != 0) continue;
    const void* handler = (now.sa_flags & SA_SIGINFO) ? reinterpret_cast<const void*>(now.sa_sigaction)
                                                      : reinterpret_cast<const void*>(now.sa_handler);
    if (now.sa_handler == SIG_IGN || now.sa_handler == SIG_DFL || !from_infinipath(handler)) continue;
    struct sigaction dfl = {};
    dfl.sa_handler = SIG_DFL;
    sigemptyset(&dfl.sa_mask);
    sigaction(sig, &dfl, nullptr);
  }
}

void ignore_file_size_signal() { std::signal(SIGXFSZ, SIG_IGN); }

StopSignals::StopSignals(bool on) : on_(on) {
  g_stop_signal.store(0);
  if (!on_) return;
  struct sigaction sa = {};
  sa.sa_handler = record_stop_signal;
  sigemptyset(&sa.sa_mask);
  // No SA_RESTART: a read blocked on a pipe returns EINTR, and the caller sees the stop.
  sigaction(SIGINT, &sa, &old_int_);
  sigaction(SIGTERM, &sa, &old_term_);
  sigaction(SIGUSR1, &sa, &old_usr1_);
}

StopSignals::~StopSignals() {
  if (!on_) return;
  sigaction(SIGINT, &old_int_, nullptr);
  sigaction(SIGTERM, &old_term_, nullptr);
  sigaction(SIGUSR1, &old_usr1_, nullptr);
}

int stop_signal() { return g_stop_signal.load(); }

const char* signal_name(int sig) {
  switch (sig) {
    case SIGINT: return "SIGINT";
    case SIGTERM: return "SIGTERM";
    case SIGUSR1: return "SIGUSR1";
    default: return "a signal";
  }
}

}  // namespace lansbert
