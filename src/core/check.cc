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

void fatal_error(const char* file, int line, const char* statement, const std::string& detail, int exit_code) {
  const std::string host = host_name();
  // A process outside a job (no rank set) names only its host.
  const int rank = g_rank.load();
  const std::string where = rank >= 0 ? "rank " + std::to_string(rank) + " on " + host : host;
  std::fprintf(stderr, "lansbert fatal [%s] %s:%d: %s%s%s\n", where.c_str(), file, line, statement,
               detail.empty() ? "" : ": ", detail.c_str());
  std::fflush(stderr);
  if (AbortHook hook = g_abort_hook.load()) hook(exit_code);
  std::abort();
}

}  // namespace lansbert
