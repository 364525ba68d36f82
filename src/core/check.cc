// fatal_error: the single reporter behind every check macro.
#include "lansbert/core/check.h"
#include "lansbert/core/host_name.h"

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <new>
#include <string>

namespace lansbert {

namespace {
std::atomic<AbortHook> g_abort_hook{nullptr};
std::atomic<int> g_rank{-1};
}  // namespace

void set_abort_hook(AbortHook hook) { g_abort_hook.store(hook); }
void set_fatal_rank(int rank) { g_rank.store(rank); }

namespace {
// "rank R on HOST", or the host alone in a process outside a job (no rank set).
std::string where() {
  const std::string host = host_name();
  const int rank = g_rank.load();
  return rank >= 0 ? "rank " + std::to_string(rank) + " on " + host : host;
}

[[noreturn]] void end_job(int exit_code) {
  std::fflush(stderr);
  if (AbortHook hook = g_abort_hook.load()) hook(exit_code);
  std::abort();
}
}  // namespace

void fatal_error(const char* file, int line, const char* statement, const std::string& detail, int exit_code) {
  std::fprintf(stderr, "lansbert fatal [%s] %s:%d: %s%s%s\n", where().c_str(), file, line, statement,
               detail.empty() ? "" : ": ", detail.c_str());
  end_job(exit_code);
}

void abort_job(const std::string& detail, int exit_code) {
  std::fprintf(stderr, "lansbert: error [%s]: %s\n", where().c_str(), detail.c_str());
  // Outside a job, the exit code itself (no core dump: the error, not a crash, is the cause).
  std::fflush(stderr);
  if (g_abort_hook.load() == nullptr) std::_Exit(exit_code);
  end_job(exit_code);
}

namespace {
[[noreturn]] void on_uncaught_exception() {
  // Fixed texts and buffers: after a failed allocation another one would abort with no message.
  const char* detail = "std::terminate called without an exception (a bug)";
  const char* what = "";
  int code = 70;
  try {
    if (const std::exception_ptr e = std::current_exception()) std::rethrow_exception(e);
  } catch (const std::bad_alloc&) {
    detail = "out of memory: an allocation failed (an input line, file or batch larger than the memory this "
             "process may use: a batch system's memory limit, ulimit -v)";
    code = 5;
  } catch (const std::exception& e) {
    detail = "internal error: an exception nothing caught: ";
    what = e.what();
  } catch (...) {
    detail = "internal error: an exception nothing caught";
  }
  char host[256] = "?";
  try {
    std::snprintf(host, sizeof host, "%s", where().c_str());
  } catch (...) {
  }
  std::fprintf(stderr, "lansbert: error [%s]: %s%s\n", host, detail, what);
  std::fflush(stderr);
  if (AbortHook hook = g_abort_hook.load()) hook(code);
  std::_Exit(code);
}
}  // namespace

void install_uncaught_exception_handler() { std::set_terminate(&on_uncaught_exception); }

}  // namespace lansbert
