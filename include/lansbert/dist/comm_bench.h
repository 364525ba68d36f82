// All-reduce bandwidth, reported as nccl-tests does: algbw = bytes / time and
// busbw = algbw * 2(n-1)/n, the per-link rate a ring all-reduce needs, comparable across
// rank counts. For the communicator in use and, as a baseline, a plain MPI_Allreduce loop.
#pragma once

#include <cstddef>
#include <vector>

#include "lansbert/core/allocator.h"
#include "lansbert/dist/communicator.h"

namespace lansbert {

struct CommBenchRow {
  size_t bytes = 0;
  double time_us = 0;  // mean over iterations, max over ranks
  double algbw_gbs = 0, busbw_gbs = 0;
  bool correct = true;  // small-integer check of the first iteration
};

// Times `iters` in-place float sum all-reduces of each size (after `warmup` untimed ones).
// wire: bf16/fp16 times the 16-bit gradient all-reduce instead (all_reduce_half_async and
// wait_all: the conversions included); a size is then bytes on the wire, bytes/2 floats.
// plain_mpi: MPI_Allreduce on MPI_COMM_WORLD directly (REQUIRES an MPI communicator).
// memory: where the buffer lives (device memory for a device communicator such as NCCL;
// the check values are copied in and out through it); host memory when null. host: the
// communicator for the host-side timing reduction (a device communicator cannot reduce a
// host double); `comm` itself when null.
std::vector<CommBenchRow> bench_all_reduce(Communicator& comm, const std::vector<size_t>& bytes,
                                           int iters, int warmup, bool plain_mpi, Allocator* memory = nullptr,
                                           Communicator* host = nullptr, GradWire wire = std::nullopt);

}  // namespace lansbert
