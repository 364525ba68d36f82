// copy_from_mapping (mapping_copy.h): a SIGBUS handler that returns to the copy it interrupted.
#include "mapping_copy.h"

#include <setjmp.h>
#include <signal.h>

#include <atomic>
#include <cstring>
#include <mutex>

namespace lansbert {
namespace {

// The copy under way on this thread: where it resumes after a fault and the bytes it reads;
// null outside a copy. Touched only by this thread and the synchronous signal the thread
// itself raises. Volatile: the compiler knows memcpy reads no global, and would otherwise drop
// the stores before it as dead.
thread_local sigjmp_buf* volatile t_resume = nullptr;
thread_local const char* volatile t_begin = nullptr;
thread_local const char* volatile t_end = nullptr;

struct sigaction g_previous = {};
std::atomic<bool> g_installed{false};
std::mutex g_install_mutex;

void on_sigbus(int sig, siginfo_t* info, void* context) {
  (void)sig, (void)context;
  const char* at = static_cast<const char*>(info->si_addr);
  if (sigjmp_buf* resume = t_resume; resume && info->si_code > 0 && at >= t_begin && at < t_end)
    siglongjmp(*resume, 1);
  // Not a fault of a copy (another mapping, a shared-memory segment out of room, a kill): the
  // earlier disposition takes it, with its own flags (an Open MPI handler that prints a
  // backtrace relies on SA_RESETHAND so that the repeated fault ends the process). A fault
  // repeats when the handler returns; a sent signal is sent again.
  sigaction(SIGBUS, &g_previous, nullptr);
  g_installed.store(false);
  if (info->si_code <= 0) raise(SIGBUS);
}

void install_handler() {
  std::lock_guard<std::mutex> lock(g_install_mutex);
  if (g_installed.load()) return;
  struct sigaction sa = {};
  sa.sa_sigaction = &on_sigbus;
  sigemptyset(&sa.sa_mask);
  // SA_NODEFER: SIGBUS is not left blocked after the jump out of the handler, so the next
  // fault is caught too (sigsetjmp then need not save the signal mask: no system call a copy).
  sa.sa_flags = SA_SIGINFO | SA_NODEFER;
  if (sigaction(SIGBUS, &sa, &g_previous) == 0) g_installed.store(true);
}

}  // namespace

bool copy_from_mapping(void* dst, const void* src, size_t n) {
  if (!g_installed.load()) install_handler();
  sigjmp_buf resume;
  if (sigsetjmp(resume, 0) != 0) {
    t_resume = nullptr;
    return false;
  }
  t_begin = static_cast<const char*>(src);
  t_end = t_begin + n;
  t_resume = &resume;
  std::memcpy(dst, src, n);
  t_resume = nullptr;
  return true;
}

}  // namespace lansbert
