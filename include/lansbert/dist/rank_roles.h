// Rank roles: who logs and writes (rank 0 only, so N ranks never race on one file) and the
// reduction of per-rank metrics to job-wide values for that one writer.
#pragma once

#include <vector>

#include "lansbert/dist/communicator.h"

namespace lansbert {

// True on the one rank that prints progress, writes metrics and checkpoints.
inline bool is_writer(const Communicator& comm) { return comm.rank() == 0; }

// Sums per-rank sums (e.g. loss*count, count, correct) over ranks, in double and in place, so
// that every rank (and the writer) can form job-wide means as sum/count. Collective: every
// rank must call it with the same size.
inline void reduce_metric_sums(Communicator& comm, std::vector<double>* sums) {
  if (!sums->empty()) comm.all_reduce(sums->data(), sums->size(), ReduceOp::kSum);
}

// The largest value over ranks (e.g. step time: the job runs at the slowest rank's pace).
inline double reduce_max(Communicator& comm, double value) {
  comm.all_reduce(&value, 1, ReduceOp::kMax);
  return value;
}

}  // namespace lansbert
