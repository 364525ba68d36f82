// Communicator: the collectives data-parallel training needs, over buffers of the backend's
// device. Implementations: SingleProcess (no MPI), MPI over host buffers (CPU backend), and
// NCCL over device buffers (CUDA backend, bootstrapped over MPI). The trainer is written
// against this interface only; the single-process one makes every collective a no-op copy,
// so a one-rank run needs no MPI at all.
#pragma once

#include <cstddef>
#include <memory>
#include <string>

#include "lansbert/core/status.h"

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
  // `recv` count. Callers pad the flat buffers so they divide evenly.
  virtual void reduce_scatter(const float* send, float* recv, size_t count, ReduceOp op) = 0;
  // Every rank contributes `count` elements; `recv` gets world()*count in rank order.
  virtual void all_gather(const float* send, float* recv, size_t count) = 0;
  virtual void broadcast(void* data, size_t bytes, int root) = 0;
  virtual void barrier() = 0;
};

// The one-process communicator: world 1, collectives copy or do nothing.
std::unique_ptr<Communicator> make_single_process_communicator();

}  // namespace lansbert
