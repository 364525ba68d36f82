// GradSync: data-parallel gradient averaging in buckets, overlapped with backward.
//
// The flat gradient buffer is cut into buckets of whole table entries, built in reverse table
// order (the order backward finishes them: heads, last encoder layer, ..., embeddings), each
// about bucket_bytes large and covering a contiguous range of the buffer (alignment gaps
// included, which are zero). On the last micro-step of a global batch the model's on_ready
// hook reports entries whose gradients are final; as soon as every entry of a bucket is
// final, its all-reduce is started (Communicator::all_reduce_async) while backward goes on,
// and finish() waits for all of them. Earlier micro-steps only accumulate locally.
//
// The same object drives every backend: over MPI the reductions are MPI_Iallreduce,
// progressed from the hook; over NCCL the communicator enqueues them on its stream after an
// event of the compute stream. With ReductionOrder::kFixedOrder each bucket is reduced at
// once in rank order (reproducible, no overlap). With a 16-bit wire (GradSyncOptions::wire)
// each bucket travels through its range of a 16-bit buffer of the gradients' memory. With
// to_owners (the sharded optimizer) a bucket is reduced to the ranks owning its parts instead
// of to every rank.
#pragma once

#include <cstddef>
#include <functional>
#include <vector>

#include "lansbert/core/buffer.h"
#include "lansbert/dist/communicator.h"
#include "lansbert/model/param_table.h"

namespace lansbert {

struct GradSyncOptions {
  size_t bucket_bytes = size_t(25) << 20;  // 25 MiB, PyTorch DDP's default
  // kAvg for gradients of per-rank mean losses; kSum when each rank already weighted its loss
  // by its share of the global batch.
  ReduceOp op = ReduceOp::kAvg;
  // fp32 (nullopt) or a 16-bit wire: half the bytes, the gradients rounded (grad_wire.h).
  GradWire wire;
  // ZeRO-1 (ShardedStep): each part of a bucket is reduced only to the rank whose shard
  // (ShardedStep::shard_range) holds it, so after finish() this rank's slice holds the reduced
  // gradients and the rest of the buffer is unspecified. The same bytes per rank as the
  // reduce-scatter after backward, but overlapped with it.
  bool to_owners = false;
};

struct GradBucket {
  size_t first_entry, end_entry;  // table rows [first, end)
  size_t begin, end;              // flat-buffer elements [begin, end)
};

class GradSync {
 public:
  // REQUIRES: grads has table.total_elements() floats of `memory` (which holds the 16-bit
  // wire buffer, if any) and outlives this object.
  GradSync(const ParamTable& table, float* grads, Communicator& comm, GradSyncOptions options,
           Allocator& memory = host_allocator());
  // Waits for reductions still in flight (an error path left finish() uncalled): they write
  // the gradients and read the wire buffer, which goes with this object.
  ~GradSync();
  GradSync(const GradSync&) = delete;
  GradSync& operator=(const GradSync&) = delete;

  const std::vector<GradBucket>& buckets() const { return buckets_; }

  // Arms the hook for this micro-step's backward: with last_micro_step false it does nothing
  // (local accumulation); with true each bucket is reduced as soon as it is final.
  void begin(bool last_micro_step);
  // Pass to BertModel::backward. Marks table entries [first, end) final.
  void on_ready(size_t first_entry, size_t end_entry);
  std::function<void(size_t, size_t)> hook() {
    return [this](size_t a, size_t b) { on_ready(a, b); };
  }
  // Starts any bucket not yet started (entries the hook never reported) and waits for all.
  // After it returns the buffer holds the reduced gradients on every rank (to_owners: on
  // this rank's shard only).
  void finish();

  // Seconds spent in finish() waiting on the network at the last call: the communication
  // backward did not hide.
  double last_wait_seconds() const { return last_wait_s_; }

 private:
  void start(size_t bucket);
  // Starts the reduction of elements [begin, end): to every rank (root < 0) or to `root`.
  void reduce(size_t begin, size_t end, int root);

  float* grads_;
  size_t total_;
  Communicator& comm_;
  GradSyncOptions options_;
  Buffer<uint16_t> wire_;  // total_elements() 16-bit values with a 16-bit wire, else empty
  std::vector<GradBucket> buckets_;
  std::vector<size_t> bucket_of_entry_;
  std::vector<size_t> pending_entries_;  // per bucket, entries not yet final
  std::vector<bool> started_;
  bool armed_ = false;
  bool in_flight_ = false;  // a bucket was started and finish() has not waited for it
  double last_wait_s_ = 0;
};

}  // namespace lansbert
