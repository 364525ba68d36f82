// Communicator: the collectives data-parallel training needs, over buffers of the backend's
// device. Implementations: SingleProcess (no MPI), MPI over host buffers (CPU backend), and
// NCCL over device buffers (CUDA backend, bootstrapped over MPI). The trainer is written
// against this interface only; the single-process one makes every collective a no-op copy,
// so a one-rank run needs no MPI at all.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <memory>
#include <optional>
#include <string>

#include "lansbert/core/check.h"
#include "lansbert/core/status.h"
#include "lansbert/kernels/half.h"

namespace lansbert {

enum class ReduceOp { kSum, kAvg, kMax };

class Communicator {
 public:
  virtual ~Communicator() = default;
  virtual int rank() const = 0;
  virtual int world() const = 0;
  virtual int local_rank() const = 0;  // rank among the processes of this host (GPU index)
  virtual int local_world() const = 0;
  virtual std::string hostname() const = 0;
  virtual const char* kind() const = 0;  // "single", "mpi", "nccl"

  // In place over `count` elements of `data` on every rank.
  virtual void all_reduce(float* data, size_t count, ReduceOp op) = 0;
  virtual void all_reduce(double* data, size_t count, ReduceOp op) = 0;
  // Rank r receives the reduction of block r: `send` holds world()*count elements,
  // `recv` count. A remainder that does not divide evenly is the caller's (ShardedStep
  // all-reduces its tail separately).
  virtual void reduce_scatter(const float* send, float* recv, size_t count, ReduceOp op) = 0;
  // Every rank contributes `count` elements; `recv` gets world()*count in rank order.
  // `send` may be recv + rank()*count (in place).
  virtual void all_gather(const float* send, float* recv, size_t count) = 0;
  virtual void broadcast(void* data, size_t bytes, int root) = 0;
  virtual void barrier() = 0;

  // Overlap of gradient reduction with backward (GradSync). all_reduce_async starts an
  // in-place all-reduce of `data` and returns at once; the buffer must not be touched until
  // wait_all() returns. progress() lets a CPU implementation advance outstanding requests
  // (MPI progresses nonblocking collectives only inside MPI calls); wait_all() completes
  // every started reduction. On NCCL the reduction is enqueued on the communication stream
  // after an event of the compute stream, and wait_all() waits for it on the host (with
  // the NCCL error check) and makes the compute stream wait on the communication stream.
  // The defaults run the blocking all_reduce at once.
  virtual void all_reduce_async(float* data, size_t count, ReduceOp op) {
    all_reduce(data, count, op);
  }
  virtual void progress() {}
  virtual void wait_all() {}

  // Gradient reductions on a 16-bit wire (kernels/grad_wire.h has the math): half the bytes
  // of the fp32 collectives. `wire` is scratch of the same memory as `data` (host or device)
  // and must not be touched until the reduction is complete. kSum or kAvg; an average is
  // scaled by 1/world before the rounding, not after the sum. With one rank the host
  // communicators (single process, MPI) leave the buffers as they are (or copy them): nothing
  // travels, and a one-rank device run hands MPI device pointers. NCCL runs the collective
  // even then (it rounds), so one GPU can test it. GradSync and ShardedStep do not use the
  // wire on one rank.
  // all_reduce_half_async: count floats of `data` rounded into count 16-bit values of
  // `wire`, summed over ranks, widened back into `data` by the time wait_all() returns.
  virtual void all_reduce_half_async(float* data, uint16_t* wire, size_t count, ReduceOp op,
                                     kern::HalfFormat format) {
    (void)data, (void)wire, (void)count, (void)op, (void)format;
    LB_CHECK_MSG(world() == 1, std::string(kind()) + " communicator has no 16-bit all-reduce");
  }
  // Blocking reduce-scatter on the wire: `send` and `wire` hold world()*count elements,
  // rank r's `recv` gets the widened reduction of block r (count floats).
  virtual void reduce_scatter_half(const float* send, uint16_t* wire, float* recv, size_t count,
                                   ReduceOp op, kern::HalfFormat format) {
    (void)wire, (void)op, (void)format;
    LB_CHECK_MSG(world() == 1, std::string(kind()) + " communicator has no 16-bit reduce-scatter");
    if (send != recv) std::memmove(recv, send, count * sizeof(float));
  }
  // Reductions to one rank, for the sharded optimizer's gradient buckets (each bucket goes to
  // the ranks that own its parts): start an in-place sum or average of data[0, count) on
  // every rank into rank `root`'s data, complete at wait_all(); other ranks' data is left
  // unspecified. Always the library's own algorithm (no fixed-order variant). The _half form
  // travels as all_reduce_half_async does (the root widens the result).
  virtual void reduce_async(float* data, size_t count, ReduceOp op, int root) {
    (void)data, (void)count, (void)op, (void)root;
    LB_CHECK_MSG(world() == 1, std::string(kind()) + " communicator has no reduce");
  }
  virtual void reduce_half_async(float* data, uint16_t* wire, size_t count, ReduceOp op, int root,
                                 kern::HalfFormat format) {
    (void)data, (void)wire, (void)count, (void)op, (void)root, (void)format;
    LB_CHECK_MSG(world() == 1, std::string(kind()) + " communicator has no 16-bit reduce");
  }
  // The blocking all-reduce on the wire. REQUIRES: no other reduction in flight.
  void all_reduce_half(float* data, uint16_t* wire, size_t count, ReduceOp op,
                       kern::HalfFormat format) {
    all_reduce_half_async(data, wire, count, op, format);
    wait_all();
  }
};

// What a rank scales its gradients by before rounding them onto the 16-bit wire.
inline float grad_wire_scale(ReduceOp op, int world) {
  LB_CHECK_MSG(op != ReduceOp::kMax, "a 16-bit reduction sums or averages; kMax stays fp32");
  return op == ReduceOp::kAvg ? 1.f / float(world) : 1.f;
}

// The format gradients travel in (distributed.grad_reduce_dtype): nullopt for fp32.
using GradWire = std::optional<kern::HalfFormat>;

// Parses "fp32" | "bf16" | "fp16"; false for anything else.
bool parse_grad_wire(const std::string& s, GradWire* out);

// How collectives reduce. kNative: the library's own algorithm (MPI_Allreduce, NCCL ring):
// fastest; bit-identical on every rank, but the order of the sum depends on the algorithm the
// library picks for this size and world. kFixedOrder: every element is summed over ranks in
// rank order 0, 1, ..., n-1 (all-to-all of blocks, ordered local sum, all-gather), so results
// are reproducible for a given world size whatever the library does. Same bytes on the wire
// as a ring (2(n-1)/n of the buffer per rank) but all-to-all and no overlap with backward.
enum class ReductionOrder { kNative, kFixedOrder };

struct CommOptions {
  ReductionOrder order = ReductionOrder::kNative;
};

// Parses the config's names (distributed.reduction_order), "fast" (kNative) | "fixed"
// (kFixedOrder), and the older "native" | "fixed_order" as aliases, so one spelling works for
// both the config and `bench-comm --order`. The message lists the accepted values; the
// caller prefixes the flag or key it came from.
Status parse_reduction_order(const std::string& s, ReductionOrder* out);
// The config's name of an order: "fast" | "fixed".
const char* reduction_order_name(ReductionOrder order);

// The one-process communicator: world 1, collectives copy or do nothing.
std::unique_ptr<Communicator> make_single_process_communicator();

}  // namespace lansbert
