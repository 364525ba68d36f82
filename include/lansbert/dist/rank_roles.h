// Rank roles: who logs and writes (rank 0 only, so N ranks never race on one file). Job-wide
// metrics are all-reduced sums that every rank forms means from (the trainer, evaluate.cc).
#pragma once

#include "lansbert/dist/communicator.h"

namespace lansbert {

// True on the one rank that prints progress, writes metrics and checkpoints.
inline bool is_writer(const Communicator& comm) { return comm.rank() == 0; }

}  // namespace lansbert
