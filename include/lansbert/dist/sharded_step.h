// ShardedStep: the optimizer step with sharded optimizer state (ZeRO-1, DESIGN decision 6).
//
// The flat buffer (table.total_elements() floats) is padded to world * shard floats and rank
// r owns elements [r*shard, (r+1)*shard) cut at the real end. One step:
//   1. reduce-scatter the gradients (average): rank r receives its slice, summed over ranks;
//      gradients outside the slice are zeroed (they are not this rank's to use);
//   2. the Updater runs on the slice only, with shard-sized m and v: LANS/LAMB sum their
//      per-block partial norms over the ranks in double (ShardSpec::reduce_sums), so blocks
//      cut by a shard boundary get whole-tensor norms, and the skip verdict is global;
//   3. all-gather the parameters so every rank holds the whole updated model.
// Traffic per rank equals one all-reduce (reduce-scatter + all-gather); optimizer memory per
// rank falls from 2N to 2N/world floats.
#pragma once

#include <cstddef>
#include <vector>

#include "lansbert/dist/communicator.h"
#include "lansbert/model/param_table.h"
#include "lansbert/optim/updater.h"

namespace lansbert {

// Seconds spent in each part of the last step() (for benchmarks).
struct ShardedStepTimes {
  double reduce_scatter = 0;  // staging copy and the collective
  double unpack = 0;          // slice into grads, zeros elsewhere
  double update = 0;          // Updater::step on the slice, including `norms`
  double norms = 0;           // cross-rank sums of per-block partial norms (inside update)
  double all_gather = 0;      // packing, the collective, copying back
};

class ShardedStep {
 public:
  // Installs the shard on the updater. REQUIRES: table, comm and updater outlive this.
  ShardedStep(const ParamTable& table, Communicator& comm, Updater& updater);

  size_t shard_begin() const { return begin_; }
  size_t shard_end() const { return end_; }          // <= total elements
  size_t shard_elements() const { return end_ - begin_; }
  size_t padded_elements() const { return shard_ * world_; }

  // One global batch: `grads` holds this rank's local (unreduced) gradients, full length;
  // m and v hold shard_elements() floats each. On return params are updated on every rank,
  // grads hold the averaged gradients on this rank's slice and 0 elsewhere.
  Status step(float* params, float* grads, float* m, float* v, StepReport* report);

  const ShardedStepTimes& last_times() const { return times_; }

 private:
  const ParamTable& table_;
  Communicator& comm_;
  Updater& updater_;
  int world_, rank_;
  size_t total_, shard_, begin_, end_;
  std::vector<float> stage_, slice_;
  ShardedStepTimes times_;
};

}  // namespace lansbert
