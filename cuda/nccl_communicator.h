// The NCCL communicator's entry point for host-only code: plain C++, no CUDA or NCCL header
// leaks out of cuda/, and no MPI header comes in. The ncclUniqueId travels as bytes through
// the bootstrap communicator's broadcast (the MPI one in a real job).
#pragma once

#include <memory>

#include "lansbert/dist/communicator.h"

namespace lansbert::cuda {

struct NcclOptions {
  // A collective that has not finished after this long (or an asynchronous NCCL error, polled
  // with ncclCommGetAsyncError while waiting) aborts the communicator and then the job through
  // fatal_error -> MPI_Abort, so a dead peer cannot hang the others for ever.
  double timeout_s = 600;
};

// Uses the device the backend bound for this rank (device_for_rank, train/device_ranks.h),
// makes rank 0 create the unique id, broadcasts it
// over `bootstrap` and joins with ncclCommInitRank. Collectives take device pointers and run
// on the communicator's own stream; blocking calls wait for completion on the host (polling
// for errors); every collective's stream is ordered after the compute stream (see
// set_nccl_compute_stream) and the legacy default stream (the device optimizer's);
// all_reduce_async returns at once, and wait_all() waits on the host (polling) and makes
// the compute stream wait on the communication stream.
// REQUIRES: bootstrap outlives nothing (only used during construction).
std::unique_ptr<Communicator> make_nccl_communicator(Communicator& bootstrap,
                                                     const NcclOptions& options = {});

// The stream the model computes on (a cudaStream_t, passed untyped); default stream if unset.
void set_nccl_compute_stream(Communicator& nccl, void* stream);

}  // namespace lansbert::cuda
