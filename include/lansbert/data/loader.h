// Loader: a background thread that reads this rank's micro-batches in the sampler's order,
// masks them when the shards are stored unmasked, and keeps a small ring of ready Batch
// buffers so a training step never waits on file reads. Buffers are swapped, not copied,
// between the thread and the consumer. A read error stops the thread and is returned by
// the next call to next(); destruction stops and joins the thread cleanly.
#pragma once

#include <condition_variable>
#include <deque>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "lansbert/data/dataset.h"
#include "lansbert/data/sampler.h"

namespace lansbert {

struct LoaderOptions {
  int world = 1;
  int rank = 0;
  int micro_batch = 32;
  int64_t global_batch = 256;  // samples per optimizer step over all ranks
  uint64_t seed = 12345;       // data order and dynamic masking
  DataPosition start;          // where a resumed run continues
  int prefetch = 4;            // ready micro-batches kept ahead
  // Dynamic masking by whole words: what the shards' header asks for, or forced here (the
  // trainer's data.whole_word). It needs the continuation pieces ("##"), by id.
  bool whole_word = false;
  std::vector<bool> is_continuation;
  // Set: draw from the set's sources (ShardSet::source_sizes) in this blend (data.weights),
  // one weight per source; unset: one shuffled order of all samples per epoch.
  std::shared_ptr<const BlendSchedule> blend;
  // Pack each micro-batch's sequences into fewer rows (data/packing.h), here in the loader's
  // thread, so that the packing is done ahead of the step.
  bool pack = false;
};

// Where a micro-batch sits in the data order.
struct MicroBatchInfo {
  DataPosition pos;   // position of the global batch it belongs to
  int micro = 0;      // its index among this rank's micro-batches of that global batch
  bool last = false;  // last micro-batch of the global batch on this rank
  DataPosition next;  // position to save once this global batch is fully consumed
};

// The order a set is read in: its sources blended by `blend` (data.weights), or, without
// one, one shuffled order of all its samples per epoch. What the loader reads by and what a
// resumed position is checked against.
Status make_sampler(const ShardSet& set, std::shared_ptr<const BlendSchedule> blend, uint64_t seed,
                    int64_t global_batch, int world, int rank, int micro_batch, Sampler* out);

class Loader {
 public:
  // REQUIRES: `set` outlives the loader and is read by no one else meanwhile.
  static Status create(ShardSet* set, const LoaderOptions& opts, std::unique_ptr<Loader>* out);
  ~Loader();

  // Blocks until the next micro-batch is ready and swaps it into *out (whose old buffers
  // are reused). Returns the thread's error, if it had one, once the batches before it are
  // consumed.
  Status next(Batch* out, MicroBatchInfo* info = nullptr);
  // Stops and joins the thread; next() then returns an error. Idempotent.
  void stop();
  const Sampler& sampler() const { return sampler_; }

 private:
  Loader() = default;
  void run();
  Status fill(const DataPosition& pos, int micro, Batch* b);

  ShardSet* set_ = nullptr;
  LoaderOptions opts_;
  Sampler sampler_;
  MaskingVocab mask_vocab_;
  float mask_prob_ = 0.15f;
  bool whole_word_ = false;

  struct Slot {
    Batch batch;
    MicroBatchInfo info;
  };
  std::vector<Slot> slots_;
  std::deque<int> free_, ready_;
  Status error_;
  bool failed_ = false, stopping_ = false;
  std::mutex mu_;
  std::condition_variable cv_;
  std::thread thread_;
};

}  // namespace lansbert
