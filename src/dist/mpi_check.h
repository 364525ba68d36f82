// MPI_CHECK: every MPI call's return code goes to the one fatal path (lansbert::fatal_error),
// which names rank, host, file:line and the call, then aborts the job with MPI_Abort.
// Private to src/dist.
#pragma once

#include <mpi.h>

#include <string>

#include "lansbert/core/check.h"

namespace lansbert {
inline std::string mpi_error_string(int code) {
  char msg[MPI_MAX_ERROR_STRING];
  int len = 0;
  if (MPI_Error_string(code, msg, &len) != MPI_SUCCESS) return "MPI error " + std::to_string(code);
  return std::string(msg, len);
}
}  // namespace lansbert

#define MPI_CHECK(call)                                                             \
  do {                                                                              \
    const int lb_mpi_rc_ = (call);                                                  \
    if (lb_mpi_rc_ != MPI_SUCCESS)                                                  \
      ::lansbert::fatal_error(__FILE__, __LINE__, #call,                            \
                              ::lansbert::mpi_error_string(lb_mpi_rc_));            \
  } while (0)
