// A job that loses a rank. Mode "fatal": rank 1 fails an LB_CHECK after a barrier while the
// other ranks wait in an all-reduce; the abort hook must end the whole job (MPI_Abort) with a
// message naming rank and host. Mode "kill": rank 1 sends itself SIGKILL instead; Open MPI
// must notice the dead process and end the job. fatal_test.sh checks exit code and time.
#include <signal.h>

#include <cstdio>
#include <cstring>
#include <vector>

#include "lansbert/core/check.h"
#include "lansbert/dist/mpi_session.h"

using namespace lansbert;

int main(int argc, char** argv) {
  const bool kill_mode = argc > 1 && std::strcmp(argv[1], "kill") == 0;
  std::unique_ptr<Communicator> c = make_mpi_communicator();
  std::printf("rank %d of %d on %s ready\n", c->rank(), c->world(), c->hostname().c_str());
  std::fflush(stdout);
  c->barrier();
  if (c->rank() == 1) {
    if (kill_mode) raise(SIGKILL);
    LB_CHECK_MSG(c->world() < 0, "deliberate failure on rank 1");
  }
  std::vector<float> x(1024, 1.f);
  for (int i = 0; i < 1000000; ++i) c->all_reduce(x.data(), x.size(), ReduceOp::kSum);
  std::printf("rank %d finished: the job was not aborted\n", c->rank());
  return 0;
}
