// fatal_error: the single reporter behind every check macro.
#include "lansbert/core/check.h"
#include "lansbert/core/host_name.h"

#include <atomic>
#include <cstdio>
#include <cstdlib>
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
  end_job(exit_code);
}

}  // namespace lansbert
