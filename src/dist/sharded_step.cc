// ShardedStep: reduce-scatter, slice update, all-gather.
#include "lansbert/dist/sharded_step.h"

#include <algorithm>
#include <cstring>

#include "lansbert/core/check.h"

namespace lansbert {

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
  spec.reduce_sums = [c](double* sums, size_t n) { c->all_reduce(sums, n, ReduceOp::kSum); };
  updater_.set_shard(spec);
}

Status ShardedStep::step(float* params, float* grads, float* m, float* v, StepReport* report) {
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
  std::fill(grads, grads + begin_, 0.0f);
  std::memcpy(grads + begin_, slice_.data(), (end_ - begin_) * sizeof(float));
  std::fill(grads + end_, grads + total_, 0.0f);

  // 2. The slice update; norms are summed over ranks inside the optimizer.
  FlatBuffers buf{params, grads, m, v};
  Status s = updater_.step(table_, buf, report);
  if (!s.is_ok()) return s;
  if (report && report->skipped) return s;  // every rank skips: parameters unchanged

  // 3. All-gather the updated slices (in place in the staging buffer).
  stage_.resize(padded);
  float* mine = stage_.data() + shard_ * rank_;
  std::memcpy(mine, params + begin_, (end_ - begin_) * sizeof(float));
  std::fill(mine + (end_ - begin_), mine + shard_, 0.0f);
  comm_.all_gather(mine, stage_.data(), shard_);
  std::memcpy(params, stage_.data(), total_ * sizeof(float));
  return s;
}

}  // namespace lansbert
