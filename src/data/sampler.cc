// The sampler's permutation: a 4-round balanced Feistel network on the smallest even-bit
// domain 2^(2h) >= n, with Philox as round function keyed by (seed, epoch, round); values
// that land outside [0, n) are encrypted again (cycle-walking), which keeps a bijection and
// takes fewer than 4 rounds of walking on average since the domain is under 4n.
#include "lansbert/data/sampler.h"

#include <fmt/format.h>

#include <algorithm>

#include "lansbert/core/check.h"
#include "lansbert/core/philox.h"

namespace lansbert {
namespace {
constexpr uint32_t kPermutationSite = 0x5A3D0000u;
constexpr int kRounds = 4;
}  // namespace

FeistelPermutation::FeistelPermutation(uint64_t n, uint64_t seed, uint64_t epoch)
    : n_(n), seed_(seed), epoch_(static_cast<uint32_t>(epoch)) {
  int bits = 0;
  while (bits < 64 && (uint64_t(1) << bits) < n) ++bits;
  half_bits_ = std::max(1, (bits + 1) / 2);
  half_mask_ = (uint64_t(1) << half_bits_) - 1;
}

uint64_t FeistelPermutation::encrypt(uint64_t x) const {
  uint64_t left = x >> half_bits_, right = x & half_mask_;
  for (int r = 0; r < kRounds; ++r) {
    const uint64_t f = (uint64_t(philox_bits(RngKey{seed_, epoch_, kPermutationSite + r}, 2 * right)) |
                        (uint64_t(philox_bits(RngKey{seed_, epoch_, kPermutationSite + r}, 2 * right + 1)) << 32)) &
                       half_mask_;
    const uint64_t next = left ^ f;
    left = right;
    right = next;
  }
  return (left << half_bits_) | right;
}

uint64_t FeistelPermutation::operator()(uint64_t i) const {
  LB_CHECK(i < n_);
  uint64_t x = encrypt(i);
  while (x >= n_) x = encrypt(x);
  return x;
}

Status Sampler::check_shape(uint64_t num_samples, int64_t global_batch, int world, int rank, int micro_batch) {
  if (world < 1 || rank < 0 || rank >= world || micro_batch < 1 || global_batch < 1) {
    return Status::invalid_argument(fmt::format("sampler: bad world {} / rank {} / micro-batch {} "
                                                "/ global batch {}", world, rank, micro_batch,
                                                global_batch));
  }
  if (global_batch % (int64_t(world) * micro_batch) != 0) {
    return Status::invalid_argument(fmt::format(
        "sampler: global batch {} is not a multiple of world {} x micro-batch {}", global_batch,
        world, micro_batch));
  }
  if (uint64_t(global_batch) > num_samples) {
    return Status::invalid_argument(fmt::format(
        "sampler: global batch {} exceeds the {} samples of the data set", global_batch, num_samples));
  }
  return Status::ok();
}

void Sampler::set_shape(uint64_t seed, int64_t global_batch, int world, int rank, int micro_batch) {
  seed_ = seed;
  global_batch_ = global_batch;
  world_ = world;
  rank_ = rank;
  micro_batch_ = micro_batch;
  micro_per_step_ = static_cast<int>(global_batch / world / micro_batch);
}

Status Sampler::create(uint64_t num_samples, uint64_t seed, int64_t global_batch, int world,
                       int rank, int micro_batch, Sampler* out) {
  LB_RETURN_IF_ERROR(check_shape(num_samples, global_batch, world, rank, micro_batch));
  *out = Sampler();
  out->n_ = num_samples;
  out->set_shape(seed, global_batch, world, rank, micro_batch);
  return Status::ok();
}

Status Sampler::create_blended(const std::vector<uint64_t>& source_sizes, std::shared_ptr<const BlendSchedule> blend,
                               uint64_t seed, int64_t global_batch, int world, int rank, int micro_batch,
                               Sampler* out) {
  if (!blend || blend->sources() != source_sizes.size())
    return Status::invalid_argument(fmt::format("sampler: {} sources for a blend of {}", source_sizes.size(),
                                                blend ? blend->sources() : 0));
  uint64_t total = 0;
  for (size_t s = 0; s < source_sizes.size(); ++s) {
    if (source_sizes[s] == 0) return Status::invalid_argument(fmt::format("sampler: blended source {} is empty", s));
    total += source_sizes[s];
  }
  // A blend repeats a source as often as its weight asks: a global batch larger than the
  // samples is allowed (only the shape is checked against it).
  LB_RETURN_IF_ERROR(check_shape(std::max<uint64_t>(total, uint64_t(global_batch)), global_batch, world, rank,
                                 micro_batch));
  *out = Sampler();
  out->n_ = total;
  out->blend_ = std::move(blend);
  out->source_size_ = source_sizes;
  out->source_begin_.resize(source_sizes.size());
  for (size_t s = 0, begin = 0; s < source_sizes.size(); begin += source_sizes[s], ++s) out->source_begin_[s] = begin;
  out->set_shape(seed, global_batch, world, rank, micro_batch);
  return Status::ok();
}

Sampler::Drawn Sampler::sample(uint64_t epoch, uint64_t k) const {
  // Built per call: it is four integers, and a sampler is shared by const reference.
  if (!blend_) return {FeistelPermutation(n_, seed_, epoch)(k), epoch};
  const BlendSchedule::Pick p = blend_->pick(k);
  const uint64_t size = source_size_[p.source], source_epoch = p.index / size;
  // Each source its own seed, so that two sources of one size are not shuffled alike. The
  // permutation (and the masks) take the source epoch's low 32 bits: an order comes again
  // only after 2^32 epochs of a source (docs/data-format.md "Blending").
  const uint64_t source_seed = seed_ ^ ((uint64_t(p.source) + 1) * 0x9E3779B97F4A7C15ull);
  return {source_begin_[p.source] + FeistelPermutation(size, source_seed, source_epoch)(p.index % size), source_epoch};
}

void Sampler::micro_batch_indices(const DataPosition& pos, int micro, std::vector<Drawn>* out) const {
  LB_CHECK(micro >= 0 && micro < micro_per_step_);
  const uint64_t share = uint64_t(global_batch_) / world_;
  const uint64_t first = pos.consumed + rank_ * share + uint64_t(micro) * micro_batch_;
  out->resize(micro_batch_);
  if (!blend_) {
    const FeistelPermutation perm(n_, seed_, pos.epoch);
    for (int j = 0; j < micro_batch_; ++j) (*out)[j] = {perm(first + j), pos.epoch};
    return;
  }
  for (int j = 0; j < micro_batch_; ++j) (*out)[j] = sample(0, first + j);
}

DataPosition Sampler::advance(const DataPosition& pos) const {
  DataPosition next{pos.epoch, pos.consumed + uint64_t(global_batch_)};
  if (blend_) return next;
  if (next.consumed + uint64_t(global_batch_) > n_) next = DataPosition{pos.epoch + 1, 0};
  return next;
}

Status Sampler::check(const DataPosition& pos) const {
  if (blend_) {
    if (pos.epoch != 0 || pos.consumed % uint64_t(global_batch_) != 0)
      return Status::invalid_argument(fmt::format(
          "data position (epoch {}, consumed {}) does not start a global batch of {} of a blend (epoch 0): was it "
          "saved with another batch size, or by a run without data.weights?", pos.epoch, pos.consumed, global_batch_));
    return Status::ok();
  }
  if (pos.consumed % uint64_t(global_batch_) != 0 || pos.consumed + global_batch_ > n_) {
    return Status::invalid_argument(fmt::format(
        "data position (epoch {}, consumed {}) does not start a global batch of {} in {} samples: "
        "was it saved with another batch size or data set?", pos.epoch, pos.consumed,
        global_batch_, n_));
  }
  return Status::ok();
}

}  // namespace lansbert
