// ShardedStep: the optimizer step with sharded optimizer state (ZeRO-1, ../shared/docs/DESIGN.md decision 6).
//
// The flat buffer (N = table.total_elements() floats) is cut into world blocks of q floats
// (q a multiple of the table's alignment, q = floor(N / (world*align)) * align) and a tail of
// the remaining N - world*q < world*align floats; rank r owns block r, the last rank also the
// tail. One step:
//   1. reduce-scatter the gradients (average) straight from the gradient buffer: rank r
//      receives block r summed over ranks; the tail is all-reduced in place (fewer than
//      world*64 floats); the slice is copied into place and gradients outside it are zeroed (they
//      are not this rank's to use);
//   2. the Updater runs on the slice only, with slice-sized m and v: LANS/LAMB sum their
//      per-block partial norms over the ranks in double (ShardSpec::reduce_sums, one
//      all-reduce of all blocks' sums per pass), so blocks cut by a shard boundary get
//      whole-tensor norms, and the skip verdict is global;
//   3. all-gather the parameters in place (block r from rank r) and broadcast the tail from
//      the last rank, so every rank holds the whole updated model.
// No padded staging copy of the whole buffer is needed (an earlier version padded N to
// world*q' and copied the gradients and the parameters through a staging buffer: four
// full-buffer copies per step). On one rank the collectives are identities and are skipped.
// Traffic per rank equals one all-reduce; optimizer memory per rank falls from 2N to ~2N/world.
// With a 16-bit wire (grad_wire.h) step 1 sends the gradients in 16 bits through a wire
// buffer of N 16-bit values; the parameters' all-gather stays fp32 (they are the master copy).
//
// Two communicators: `data` carries the collectives over the flat buffers (MPI for host
// buffers, NCCL for device buffers), `scalars` the per-block norm sums, which are host
// doubles (the same MPI communicator on the CPU). `memory` is the allocator of the flat
// buffers (host, or the device's), used for the slice buffer, its copy and the zeroing.
#pragma once

#include <cstddef>

#include "lansbert/core/allocator.h"
#include "lansbert/core/buffer.h"
#include "lansbert/dist/communicator.h"
#include "lansbert/model/param_table.h"
#include "lansbert/optim/updater.h"

namespace lansbert {

// Seconds spent in each part of the last step() (for benchmarks and the trainer's log). With
// device buffers the parts that only enqueue work are not separated from what follows them.
struct ShardedStepTimes {
  double reduce_scatter = 0;  // the reduce-scatter and the tail's all-reduce
  double unpack = 0;          // slice into grads, zeros elsewhere
  double update = 0;          // Updater::step on the slice, including `norms`
  double norms = 0;           // cross-rank sums of per-block partial norms (inside update)
  double all_gather = 0;      // the in-place all-gather and the tail's broadcast
};

class ShardedStep {
 public:
  // Installs the shard on the updater. REQUIRES: table, both communicators, updater and
  // memory outlive this; data and scalars have the same ranks. caller_reduces: the gradients
  // come to step() already reduced on this rank's slice (GradSync with to_owners, overlapped
  // with backward), so step 1 below only zeroes the rest.
  ShardedStep(const ParamTable& table, Communicator& data, Communicator& scalars, Updater& updater,
              Allocator& memory = host_allocator(), GradWire wire = std::nullopt,
              bool caller_reduces = false);
  // Host buffers: one communicator for both.
  ShardedStep(const ParamTable& table, Communicator& comm, Updater& updater)
      : ShardedStep(table, comm, comm, updater) {}

  size_t shard_begin() const { return begin_; }
  size_t shard_end() const { return end_; }  // <= total elements
  size_t shard_elements() const { return end_ - begin_; }

  // The slice [begin, end) rank `rank` of `world` owns for `total` elements (the layout above).
  static void shard_range(size_t total, int world, int rank, size_t* begin, size_t* end);

  // One global batch: `grads` holds this rank's local (unreduced) gradients, full length (with
  // caller_reduces: the averaged ones on this rank's slice, anything elsewhere);
  // m and v hold shard_elements() floats each. On return params are updated on every rank,
  // grads hold the averaged gradients on this rank's slice and 0 elsewhere.
  Status step(float* params, float* grads, float* m, float* v, StepReport* report);

  const ShardedStepTimes& last_times() const { return times_; }

 private:
  // Step 1 (unless caller_reduces): the averaged slice into slice_, the tail in place.
  void reduce_scatter(float* grads);

  const ParamTable& table_;
  Communicator& data_;
  Communicator& scalars_;
  Updater& updater_;
  Allocator& memory_;
  int world_, rank_;
  size_t total_, block_, begin_, end_;
  GradWire wire_;
  bool caller_reduces_;
  Buffer<float> slice_;  // block_ floats: the reduce-scatter's output
  Buffer<uint16_t> wire_buf_;  // total_ 16-bit values with a 16-bit wire and world > 1
  ShardedStepTimes times_;
};

}  // namespace lansbert
