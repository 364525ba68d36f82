// SIGINT, SIGTERM and SIGUSR1: how lansbert stops when asked to.
//
// restore_default_signal_actions(), first thing in main: libinfinipath (loaded with the
// PSM providers that libfabric and Open MPI link) installs, from a load-time constructor,
// handlers for SIGINT, SIGTERM, SIGSEGV, SIGBUS, SIGILL and SIGABRT that print a backtrace
// and call exit(1). exit() inside a signal handler runs static destructors while worker
// threads still run, which can hang the process; it also turns Ctrl-C into a silent exit
// status 1 and a crash into no core dump. Those handlers (found by address with dladdr) go
// back to the default action; any other (a sanitizer's, an inherited SIG_IGN as nohup and
// background jobs expect) stays. MPI_Init, later, installs what Open MPI wants.
//
// StopSignals: while one is alive, SIGINT, SIGTERM and SIGUSR1 only record themselves; long jobs
// poll stop_signal() at safe points (the trainer after a step, with a checkpoint; prep
// between documents, leaving its output directory as it was) and return. SIGUSR1 is the one
// to send to `mpirun`: Open MPI's mpirun forwards it to every rank and waits for them, where
// it forwards SIGTERM/SIGINT and SIGKILLs the ranks a second later (odls_base_sigkill_timeout).
#pragma once

#include <csignal>

namespace lansbert {

void restore_default_signal_actions();

// SIGXFSZ ignored, first thing in main too: a write past a file size limit (`ulimit -f`, a
// batch system's RLIMIT_FSIZE) then fails with EFBIG, which lansbert reports naming the file
// (the trainer after writing a checkpoint where it can), instead of the process dying of the
// signal with no message. Launchers (mpirun's daemons) do not pass an inherited SIG_IGN on.
void ignore_file_size_signal();

class StopSignals {
 public:
  // on = false: a no-op guard (library callers that leave signals to the program).
  explicit StopSignals(bool on = true);
  ~StopSignals();
  StopSignals(const StopSignals&) = delete;
  StopSignals& operator=(const StopSignals&) = delete;

 private:
  bool on_;
  struct sigaction old_int_ = {}, old_term_ = {}, old_usr1_ = {};
};

// The signal (SIGINT, SIGTERM or SIGUSR1) received while a StopSignals guard was alive, 0 if none.
// Cleared when a guard is created.
int stop_signal();
// "SIGINT", "SIGTERM", "SIGUSR1" or "a signal".
const char* signal_name(int sig);

}  // namespace lansbert
