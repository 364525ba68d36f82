// The one fatal path. LB_CHECK (and the CUDA/cuBLAS/NCCL/MPI families built on it in their
// own layers) reports rank, host, file:line and the failing statement, then ends the whole
// job: fatal_error calls the abort hook, which the dist layer sets to MPI_Abort so that no
// rank is left hanging in a collective. Only program bugs and broken devices come here;
// bad user input is a Status.
#pragma once

#include <string>

namespace lansbert {

// Prints "lansbert fatal [rank R on HOST] FILE:LINE: STATEMENT: DETAIL" ([HOST] before a rank
// is set) and aborts; under MPI the job's exit status is `exit_code` (a Status's, when bad
// input ends a multi-rank run).
[[noreturn]] void fatal_error(const char* file, int line, const char* statement,
                              const std::string& detail, int exit_code = 1);

// Bad input or a failed run under mpirun, which must end every rank (one left in a collective
// would wait forever): prints "lansbert: error [rank R on HOST]: DETAIL", without a source
// location (no program bug), and aborts the job as fatal_error does, with `exit_code`; outside
// a job (no abort hook) the process exits with `exit_code`.
[[noreturn]] void abort_job(const std::string& detail, int exit_code);

// First thing in main: an exception nothing catches ends the job with a message instead of
// "terminate called after throwing ...". std::bad_alloc (an input line, file or batch larger
// than the memory this process may use: a batch system's limit, `ulimit -v`) is exit 5 with
// "out of memory"; any other is an internal error (70) with its what(). Under MPI the job
// ends through the abort hook; outside a job the process exits with the code (no core dump:
// the exception, not a crash, is the cause).
void install_uncaught_exception_handler();

// The dist layer installs a hook (MPI_Abort) and the rank shown in messages.
using AbortHook = void (*)(int exit_code);
void set_abort_hook(AbortHook hook);
void set_fatal_rank(int rank);

}  // namespace lansbert

#define LB_CHECK(cond)                                                  \
  do {                                                                  \
    if (!(cond)) ::lansbert::fatal_error(__FILE__, __LINE__, #cond, ""); \
  } while (0)

#define LB_CHECK_MSG(cond, msg)                                            \
  do {                                                                     \
    if (!(cond)) ::lansbert::fatal_error(__FILE__, __LINE__, #cond, (msg)); \
  } while (0)
