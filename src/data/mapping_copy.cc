// copy_from_mapping (mapping_copy.h): a SIGBUS handler that returns to the copy it interrupted.
#include "mapping_copy.h"

#include <setjmp.h>
#include <signal.h>

#include <cstring>
#include <mutex>

namespace lansbert {
namespace {

// Where the copy on this thread resumes after a fault; null outside a copy. Touched only by
// this thread and the synchronous signal the thread itself raises. Volatile: the compiler
// knows memcpy reads no global, and would otherwise drop the store before it as dead.
thread_local sigjmp_buf* volatile t_resume = nullptr;
struct sigaction g_previous = {};

void on_sigbus(int sig, siginfo_t* info, void* context) {
  if (sigjmp_buf* resume = t_resume) siglongjmp(*resume, 1);
  // Not a fault of ours: what was there before decides.
  if (g_previous.sa_flags & SA_SIGINFO) {
    if (g_previous.sa_sigaction) return g_previous.sa_sigaction(sig, info, context);
  } else if (g_previous.sa_handler != SIG_DFL && g_previous.sa_handler != SIG_IGN && g_previous.sa_handler) {
    return g_previous.sa_handler(sig);
  }
  signal(SIGBUS, SIG_DFL);  // the default action: the faulting access repeats and ends the process
}

void install_handler() {
  struct sigaction sa = {};
  sa.sa_sigaction = &on_sigbus;
  sigemptyset(&sa.sa_mask);
  // SA_NODEFER: SIGBUS is not left blocked after the jump out of the handler, so the next
  // fault is caught too (sigsetjmp then need not save the signal mask: no system call a copy).
  sa.sa_flags = SA_SIGINFO | SA_NODEFER;
  sigaction(SIGBUS, &sa, &g_previous);
}

}  // namespace

bool copy_from_mapping(void* dst, const void* src, size_t n) {
  static std::once_flag installed;
  std::call_once(installed, install_handler);
  sigjmp_buf resume;
  if (sigsetjmp(resume, 0) != 0) {
    t_resume = nullptr;
    return false;
  }
  t_resume = &resume;
  std::memcpy(dst, src, n);
  t_resume = nullptr;
  return true;
}

}  // namespace lansbert
