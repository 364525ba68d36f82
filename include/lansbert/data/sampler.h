// Data order as a pure function (docs/data-format.md). Samples of all shards of a run have
// one global index in [0, N). Epoch e visits them in the order of a seeded bijection of
// [0, N) (a Feistel network with cycle-walking: constant memory, no per-sample array).
// Global batch g of an epoch is permuted positions [g*G, (g+1)*G); rank r of `world` takes
// the contiguous share [r*G/world, (r+1)*G/world) of it, cut into micro-batches. So the
// position (epoch, samples consumed) alone says what comes next, for any rank count.
//
// A blend (data.weights) draws position k of the run from the source BlendSchedule picks,
// at that source's next place in its own order: source s's picks go through the seeded
// bijections of its N_s samples one epoch of the source after another. The run then has no
// epoch of its own: its position is (0, samples the run has consumed).
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "lansbert/core/status.h"
#include "lansbert/data/blend.h"

namespace lansbert {

// A seeded bijection of [0, n).
class FeistelPermutation {
 public:
  FeistelPermutation(uint64_t n, uint64_t seed, uint64_t epoch);
  uint64_t size() const { return n_; }
  // REQUIRES: i < size(). Returns the image of i.
  uint64_t operator()(uint64_t i) const;

 private:
  uint64_t encrypt(uint64_t x) const;
  uint64_t n_;
  uint64_t seed_;
  uint32_t epoch_;
  int half_bits_;
  uint64_t half_mask_;
};

// Where the run is in its data: epoch, and samples of that epoch the whole run (all ranks)
// has consumed; always a multiple of the global batch. Saved in checkpoints.
struct DataPosition {
  uint64_t epoch = 0;
  uint64_t consumed = 0;
  bool operator==(const DataPosition&) const = default;
};

class Sampler {
 public:
  // `global_batch` must be a multiple of world * micro_batch and at most num_samples.
  static Status create(uint64_t num_samples, uint64_t seed, int64_t global_batch, int world,
                       int rank, int micro_batch, Sampler* out);
  // A blend of sources of the given sizes (each > 0), laid one after another in the global
  // index [0, sum), one weight of `blend` each.
  static Status create_blended(const std::vector<uint64_t>& source_sizes, std::shared_ptr<const BlendSchedule> blend,
                               uint64_t seed, int64_t global_batch, int world, int rank, int micro_batch,
                               Sampler* out);

  uint64_t num_samples() const { return n_; }
  int64_t global_batch() const { return global_batch_; }
  bool blended() const { return blend_ != nullptr; }
  // Full global batches per epoch; the last N mod G samples of an epoch's order are skipped.
  // A blend has no epoch: 0.
  uint64_t batches_per_epoch() const { return blended() ? 0 : n_ / uint64_t(global_batch_); }
  int micro_batches_per_step() const { return micro_per_step_; }
  int micro_batch() const { return micro_batch_; }

  // The global sample at position k of epoch e's order, and the epoch it is drawn in (e, or
  // for a blend its source's epoch: what dynamic masking keys a sample's masks by).
  struct Drawn {
    uint64_t index = 0;
    uint64_t epoch = 0;
  };
  Drawn sample(uint64_t epoch, uint64_t k) const;
  // This rank's micro-batch `micro` (0 <= micro < micro_batches_per_step()) of the global
  // batch that starts at `pos`: its global samples.
  void micro_batch_indices(const DataPosition& pos, int micro, std::vector<Drawn>* out) const;
  // The position after the global batch that starts at `pos` (next epoch when none is left).
  DataPosition advance(const DataPosition& pos) const;
  // A position saved by a run with another global batch or sample count is invalid (a
  // blend's: one with an epoch, or not at a global batch's start).
  Status check(const DataPosition& pos) const;

 private:
  static Status check_shape(uint64_t num_samples, int64_t global_batch, int world, int rank, int micro_batch);
  void set_shape(uint64_t seed, int64_t global_batch, int world, int rank, int micro_batch);

  uint64_t n_ = 0, seed_ = 0;
  std::shared_ptr<const BlendSchedule> blend_;
  std::vector<uint64_t> source_begin_, source_size_;  // a blend's sources in the global index
  int64_t global_batch_ = 0;
  int world_ = 1, rank_ = 0, micro_batch_ = 1, micro_per_step_ = 1;
};

}  // namespace lansbert
