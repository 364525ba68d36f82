// ShardedStep: reduce-scatter, slice update, all-gather, without staging copies.
#include "lansbert/dist/sharded_step.h"

#include <algorithm>
#include <chrono>

#include "lansbert/core/check.h"

namespace lansbert {
namespace {
using Clock = std::chrono::steady_clock;
double since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

size_t block_size(size_t total, int world) {
  const size_t a = ParamTable::kAlign;
  return total / (size_t(world) * a) * a;
}
}  // namespace

void ShardedStep::shard_range(size_t total, int world, int rank, size_t* begin, size_t* end) {
  LB_CHECK(world >= 1 && rank >= 0 && rank < world);
  const size_t q = block_size(total, world);
  *begin = q * size_t(rank);
  *end = rank == world - 1 ? total : *begin + q;
}

ShardedStep::ShardedStep(const ParamTable& table, Communicator& data, Communicator& scalars,
                         Updater& updater, Allocator& memory, GradWire wire, bool caller_reduces)
    : table_(table),
      data_(data),
      scalars_(scalars),
      updater_(updater),
      memory_(memory),
      wire_(wire),
      caller_reduces_(caller_reduces) {
  LB_CHECK_MSG(data.world() == scalars.world() && data.rank() == scalars.rank(),
               "ShardedStep: the data and scalar communicators disagree on rank or world");
  world_ = data.world();
  rank_ = data.rank();
  total_ = table.total_elements();
  block_ = block_size(total_, world_);
  shard_range(total_, world_, rank_, &begin_, &end_);
  if (world_ > 1 && block_ > 0 && !caller_reduces_) slice_ = Buffer<float>(block_, memory_);
  if (world_ > 1 && wire_ && !caller_reduces_) wire_buf_ = Buffer<uint16_t>(total_, memory_);
  ShardSpec spec;
  spec.begin = begin_;
  spec.end = end_;
  Communicator* c = &scalars_;
  ShardedStepTimes* times = &times_;
  spec.reduce_sums = [c, times](double* sums, size_t n) {
    const auto t0 = Clock::now();
    c->all_reduce(sums, n, ReduceOp::kSum);
    times->norms += since(t0);
  };
  updater_.set_shard(spec);
}

void ShardedStep::reduce_scatter(float* grads) {
  const size_t tail_at = block_ * size_t(world_), tail = total_ - tail_at;
  if (wire_) {
    uint16_t* w = wire_buf_.data();
    if (block_ > 0) data_.reduce_scatter_half(grads, w, slice_.data(), block_, ReduceOp::kAvg, *wire_);
    if (tail > 0) data_.all_reduce_half(grads + tail_at, w + tail_at, tail, ReduceOp::kAvg, *wire_);
  } else {
    if (block_ > 0) data_.reduce_scatter(grads, slice_.data(), block_, ReduceOp::kAvg);
    if (tail > 0) data_.all_reduce(grads + tail_at, tail, ReduceOp::kAvg);
  }
}

Status ShardedStep::step(float* params, float* grads, float* m, float* v, StepReport* report) {
  times_ = ShardedStepTimes{};
  const bool scatter = world_ > 1 && !caller_reduces_;  // else reduced already (or one rank)
  // 1. Reduce-scatter from the gradient buffer itself; the tail (owned by the last rank) is
  // all-reduced in place, so it already sits behind the last block.
  auto t = Clock::now();
  if (scatter) reduce_scatter(grads);
  times_.reduce_scatter = since(t);
  t = Clock::now();
  if (world_ > 1) {
    if (scatter && block_ > 0) memory_.copy_device(grads + begin_, slice_.data(), block_ * sizeof(float));
    if (begin_ > 0) memory_.set_zero(grads, begin_ * sizeof(float));
    if (end_ < total_) memory_.set_zero(grads + end_, (total_ - end_) * sizeof(float));
  }
  times_.unpack = since(t);

  // 2. The slice update; norms are summed over ranks inside the optimizer.
  t = Clock::now();
  FlatBuffers buf{params, grads, m, v};
  Status s = updater_.step(table_, buf, report);
  times_.update = since(t);
  if (!s.is_ok()) return s;
  if (report && report->skipped) return s;  // every rank skips: parameters unchanged

  // 3. All-gather in place (each rank's block already sits at its offset), then the tail.
  t = Clock::now();
  if (world_ > 1) {
    if (block_ > 0) data_.all_gather(params + begin_, params, block_);
    const size_t tail = total_ - block_ * size_t(world_);
    if (tail > 0) data_.broadcast(params + block_ * world_, tail * sizeof(float), world_ - 1);
  }
  times_.all_gather = since(t);
  return s;
}

}  // namespace lansbert
