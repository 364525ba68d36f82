// GradSync: bucket plan and the start-when-final bookkeeping.
#include "lansbert/dist/grad_sync.h"

#include <algorithm>
#include <chrono>

#include "lansbert/core/check.h"
#include "lansbert/dist/sharded_step.h"

namespace lansbert {

GradSync::GradSync(const ParamTable& table, float* grads, Communicator& comm,
                   GradSyncOptions options, Allocator& memory)
    : grads_(grads), total_(table.total_elements()), comm_(comm), options_(options) {
  LB_CHECK(table.size() > 0);
  if (options_.wire && comm.world() > 1) wire_ = Buffer<uint16_t>(table.total_elements(), memory);
  const size_t n = table.size();
  const size_t limit = std::max<size_t>(options.bucket_bytes / sizeof(float), 1);
  bucket_of_entry_.assign(n, 0);
  // From the last entry down: a bucket closes once it holds `limit` elements. Its range runs
  // from its first entry's offset to the next bucket's start (or the buffer's end), so the
  // buckets tile the whole buffer.
  size_t end_entry = n, end_elem = table.total_elements(), acc = 0;
  for (size_t i = n; i-- > 0;) {
    acc += table[i].numel;
    if (acc >= limit || i == 0) {
      const size_t begin_elem = i == 0 ? 0 : table[i].offset;
      for (size_t k = i; k < end_entry; ++k) bucket_of_entry_[k] = buckets_.size();
      buckets_.push_back({i, end_entry, begin_elem, end_elem});
      end_entry = i;
      end_elem = begin_elem;
      acc = 0;
    }
  }
  pending_entries_.assign(buckets_.size(), 0);
  started_.assign(buckets_.size(), false);
}

GradSync::~GradSync() {
  if (in_flight_) comm_.wait_all();
}

void GradSync::begin(bool last_micro_step) {
  armed_ = last_micro_step;
  if (!armed_) return;
  for (size_t b = 0; b < buckets_.size(); ++b) {
    pending_entries_[b] = buckets_[b].end_entry - buckets_[b].first_entry;
    started_[b] = false;
  }
}

void GradSync::on_ready(size_t first_entry, size_t end_entry) {
  if (!armed_) return;
  LB_CHECK(first_entry <= end_entry && end_entry <= bucket_of_entry_.size());
  for (size_t e = first_entry; e < end_entry; ++e) {
    const size_t b = bucket_of_entry_[e];
    LB_CHECK_MSG(pending_entries_[b] > 0, "entry " + std::to_string(e) + " reported twice");
    if (--pending_entries_[b] == 0) start(b);
  }
  comm_.progress();
}

void GradSync::start(size_t b) {
  started_[b] = true;
  in_flight_ = true;
  const GradBucket& k = buckets_[b];
  if (!options_.to_owners) {
    reduce(k.begin, k.end, -1);
    return;
  }
  const int world = comm_.world();
  for (int r = 0; r < world; ++r) {  // the part of the bucket in each rank's shard
    size_t rb, re;
    ShardedStep::shard_range(total_, world, r, &rb, &re);
    const size_t s0 = std::max(k.begin, rb), s1 = std::min(k.end, re);
    if (s0 < s1) reduce(s0, s1, r);
  }
}

void GradSync::reduce(size_t begin, size_t end, int root) {
  float* g = grads_ + begin;
  const size_t n = end - begin;
  if (wire_.size() > 0) {  // a 16-bit wire with more than one rank
    uint16_t* w = wire_.data() + begin;
    if (root < 0)
      comm_.all_reduce_half_async(g, w, n, options_.op, *options_.wire);
    else
      comm_.reduce_half_async(g, w, n, options_.op, root, *options_.wire);
  } else if (root < 0) {
    comm_.all_reduce_async(g, n, options_.op);
  } else {
    comm_.reduce_async(g, n, options_.op, root);
  }
}

void GradSync::finish() {
  const auto t0 = std::chrono::steady_clock::now();
  if (!armed_) begin(true);  // no hook was used: reduce everything now
  for (size_t b = 0; b < buckets_.size(); ++b) {
    if (!started_[b]) start(b);
  }
  comm_.wait_all();
  in_flight_ = false;
  armed_ = false;
  last_wait_s_ = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

}  // namespace lansbert
