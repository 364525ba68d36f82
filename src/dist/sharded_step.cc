// ShardedStep: reduce-scatter, slice update, all-gather.
#include "lansbert/dist/sharded_step.h"

#include <algorithm>
#include <chrono>
#include <cstring>

#include "lansbert/core/check.h"

namespace lansbert {
namespace {
using Clock = std::chrono::steady_clock;
double since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }
}  // namespace

ShardedStep::ShardedStep(const ParamTable& table, Communicator& comm, Updater& updater)
    : table_(table), comm_(comm), updater_(updater) {
  world_ = comm.world();
  rank_ = comm.rank();
  total_ = table.total_elements();
  // Shards are multiples of the table's alignment, so slices start on 256-byte boundaries.
  const size_t a = ParamTable::kAlign;
  shard_ = ((total_ + world_ - 1) / world_ + a - 1) / a * a;
  begin_ = std::min(total_, shard_ * rank_);
  end_ = std::min(total_, begin_ + shard_);
  ShardSpec spec;
  spec.begin = begin_;
  spec.end = end_;
  Communicator* c = &comm_;
  ShardedStepTimes* times = &times_;
  spec.reduce_sums = [c, times](double* sums, size_t n) {
    const auto t0 = Clock::now();
    c->all_reduce(sums, n, ReduceOp::kSum);
    times->norms += since(t0);
  };
  updater_.set_shard(spec);
}

Status ShardedStep::step(float* params, float* grads, float* m, float* v, StepReport* report) {
  times_ = ShardedStepTimes{};
  auto t = Clock::now();
  const size_t padded = padded_elements();
  // 1. Reduce-scatter. The model's buffers are exactly total_ long; the padded tail lives in a
  // staging copy (when total_ divides evenly the gradients are sent in place).
  const float* send = grads;
  if (padded != total_) {
    stage_.resize(padded);
    std::memcpy(stage_.data(), grads, total_ * sizeof(float));
    std::fill(stage_.begin() + total_, stage_.end(), 0.0f);
    send = stage_.data();
  }
  slice_.resize(shard_);
  comm_.reduce_scatter(send, slice_.data(), shard_, ReduceOp::kAvg);
  times_.reduce_scatter = since(t);
  t = Clock::now();
  std::fill(grads, grads + begin_, 0.0f);
  std::memcpy(grads + begin_, slice_.data(), (end_ - begin_) * sizeof(float));
  std::fill(grads + end_, grads + total_, 0.0f);
  times_.unpack = since(t);

  // 2. The slice update; norms are summed over ranks inside the optimizer.
  t = Clock::now();
  FlatBuffers buf{params, grads, m, v};
  Status s = updater_.step(table_, buf, report);
  times_.update = since(t);
  if (!s.is_ok()) return s;
  if (report && report->skipped) return s;  // every rank skips: parameters unchanged

  // 3. All-gather the updated slices (in place in the staging buffer).
  t = Clock::now();
  stage_.resize(padded);
  float* mine = stage_.data() + shard_ * rank_;
  std::memcpy(mine, params + begin_, (end_ - begin_) * sizeof(float));
  std::fill(mine + (end_ - begin_), mine + shard_, 0.0f);
  comm_.all_gather(mine, stage_.data(), shard_);
  std::memcpy(params, stage_.data(), total_ * sizeof(float));
  times_.all_gather = since(t);
  return s;
}

}  // namespace lansbert
