// Loader: the producer thread and the ring of buffers. The ring is `prefetch` slots whose
// indices move between a free list and a ready queue under one mutex; the producer fills a
// slot outside the lock, so the consumer only ever waits when the thread is truly behind.
#include "lansbert/data/loader.h"

#include <fmt/format.h>

#include <utility>

#include "lansbert/data/packing.h"

namespace lansbert {

Status make_sampler(const ShardSet& set, std::shared_ptr<const BlendSchedule> blend, uint64_t seed,
                    int64_t global_batch, int world, int rank, int micro_batch, Sampler* out) {
  if (!blend)
    return Sampler::create(uint64_t(set.count()), seed, global_batch, world, rank, micro_batch, out);
  const std::vector<int64_t>& sizes = set.source_sizes();
  return Sampler::create_blended(std::vector<uint64_t>(sizes.begin(), sizes.end()), std::move(blend), seed,
                                 global_batch, world, rank, micro_batch, out);
}

Status Loader::create(ShardSet* set, const LoaderOptions& opts, std::unique_ptr<Loader>* out) {
  if (opts.prefetch < 1) return Status::invalid_argument("loader: prefetch must be at least 1");
  std::unique_ptr<Loader> l(new Loader());
  l->set_ = set;
  l->opts_ = opts;
  LB_RETURN_IF_ERROR(make_sampler(*set, opts.blend, opts.seed, opts.global_batch, opts.world, opts.rank,
                                  opts.micro_batch, &l->sampler_));
  LB_RETURN_IF_ERROR(l->sampler_.check(opts.start));
  if (set->dynamic_masking()) {
    const ShardInfo& info = *set->info();  // dynamic masking exists only in our format
    l->mask_vocab_.cls_id = info.cls_id;
    l->mask_vocab_.sep_id = info.sep_id;
    l->mask_vocab_.mask_id = info.mask_id;
    l->mask_vocab_.vocab_size = info.vocab_size;
    l->mask_prob_ = info.masked_lm_prob;
    l->whole_word_ = info.whole_word || opts.whole_word;
    if (l->whole_word_ && opts.is_continuation.empty()) {
      return Status::invalid_argument(
          "data.vocab: whole-word dynamic masking (asked for by the shards or data.whole_word) needs the vocab, "
          "to know which pieces continue a word; set data.vocab to the vocab the shards were made with");
    }
    if (l->whole_word_ && opts.is_continuation.size() != size_t(info.vocab_size)) {
      return Status::invalid_argument(fmt::format(
          "data.vocab: has {} tokens, the shards were made with a vocab of {}", opts.is_continuation.size(),
          info.vocab_size));
    }
    l->mask_vocab_.is_continuation = opts.is_continuation;
  }
  l->slots_.resize(opts.prefetch);
  for (int i = 0; i < opts.prefetch; ++i) {
    l->slots_[i].batch.resize(opts.micro_batch, set->seq_len(), set->max_pred());
    l->free_.push_back(i);
  }
  l->thread_ = std::thread([p = l.get()] { p->run(); });
  *out = std::move(l);
  return Status::ok();
}

Loader::~Loader() { stop(); }

void Loader::stop() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stopping_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
}

Status Loader::fill(const DataPosition& pos, int micro, Batch* b) {
  if (b->batch != opts_.micro_batch || b->seq_len != set_->seq_len() || b->max_pred != set_->max_pred() ||
      b->packed()) {
    b->resize(opts_.micro_batch, set_->seq_len(), set_->max_pred());
  }
  std::vector<Sampler::Drawn> drawn;
  sampler_.micro_batch_indices(pos, micro, &drawn);
  std::vector<int> lengths(opts_.pack ? opts_.micro_batch : 0);  // of the sequences, to pack
  for (int j = 0; j < opts_.micro_batch; ++j) {
    const int64_t index = int64_t(drawn[j].index);
    LB_RETURN_IF_ERROR(set_->read(index, b, j));
    // Keyed by the epoch the sample is drawn in: a blend's repeats of a source get new masks.
    if (set_->dynamic_masking())
      dynamic_mask_row(b, j, opts_.seed, drawn[j].epoch, drawn[j].index, mask_prob_, whole_word_, mask_vocab_);
    if (opts_.pack) LB_RETURN_IF_ERROR(packable_sample(*b, j, *set_, index, &lengths[j]));
  }
  if (opts_.pack) pack_checked_batch(b, lengths);
  return Status::ok();
}

void Loader::run() {
  DataPosition pos = opts_.start;
  const int per_step = sampler_.micro_batches_per_step();
  int micro = 0;
  for (;;) {
    int slot;
    {
      std::unique_lock<std::mutex> lock(mu_);
      cv_.wait(lock, [&] { return stopping_ || !free_.empty(); });
      if (stopping_) return;
      slot = free_.front();
      free_.pop_front();
    }
    Slot& s = slots_[slot];
    const Status st = fill(pos, micro, &s.batch);
    s.info = MicroBatchInfo{pos, micro, micro == per_step - 1, sampler_.advance(pos)};
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (!st.is_ok()) {
        error_ = st;
        failed_ = true;
      } else {
        ready_.push_back(slot);
      }
    }
    cv_.notify_all();
    if (!st.is_ok()) return;
    if (++micro == per_step) {
      micro = 0;
      pos = sampler_.advance(pos);
    }
  }
}

Status Loader::next(Batch* out, MicroBatchInfo* info) {
  int slot;
  {
    std::unique_lock<std::mutex> lock(mu_);
    cv_.wait(lock, [&] { return stopping_ || failed_ || !ready_.empty(); });
    if (stopping_) return Status::internal("loader: next() after stop()");
    if (ready_.empty()) return error_;  // failed_, and the batches before the error are consumed
    slot = ready_.front();
    ready_.pop_front();
  }
  std::swap(*out, slots_[slot].batch);
  if (info != nullptr) *info = slots_[slot].info;
  {
    std::lock_guard<std::mutex> lock(mu_);
    free_.push_back(slot);
  }
  cv_.notify_all();
  return Status::ok();
}

}  // namespace lansbert
