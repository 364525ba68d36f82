// Weighted blending of training sources (data.weights; docs/data-format.md "Blending"):
// which source each position of the run's sample order draws from, as a pure function of
// the position, like the sampler's permutation (constant work per sample, nothing to save
// but the position).
//
// The weights are turned into whole shares of a period of kPeriod picks (largest
// remainders), and the picks of a period are ordered by stride scheduling: the j-th pick of
// a source of share n falls at time (j + 1/2) / n of the period (ties to the lower source
// index). That is one infinite stride order cut into periods, so position k is pick
// k mod kPeriod of its period. Every prefix of it holds each source within
// 1/2 + S*n/(2*kPeriod) picks of n/kPeriod of the prefix (S sources; blend.cc derives it,
// tests/data/blend_test.cc checks it), any run of positions within twice that: a global
// batch is a blend itself, not a stretch of one source.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "lansbert/core/status.h"

namespace lansbert {

class BlendSchedule {
 public:
  // Picks per period: the weights' resolution is 1/kPeriod of their sum.
  static constexpr uint32_t kPeriod = 1u << 16;

  // Weights must be finite and positive, and none below 1/kPeriod of their sum (such a
  // source would get no pick). `what` names the weights in errors ("data.weights").
  static Status create(const std::vector<double>& weights, const std::string& what, BlendSchedule* out);
  // The whole shares alone (create's first half, with its checks): for checking weights and
  // comparing blends without ordering a period.
  static Status shares(const std::vector<double>& weights, const std::string& what, std::vector<uint32_t>* out);

  size_t sources() const { return shares_.size(); }
  // Picks of source s per period of kPeriod.
  uint32_t share(size_t s) const { return shares_[s]; }

  // Position k of the blended order: its source, and how many picks of that source come
  // before it (the index into the source's own order).
  struct Pick {
    uint32_t source = 0;
    uint64_t index = 0;
  };
  Pick pick(uint64_t k) const;
  // Picks of each source among positions [0, k).
  std::vector<uint64_t> picks_before(uint64_t k) const;
  // Whether two lists of weights make the same blend (the same shares: [1, 1] and [0.5, 0.5]
  // do); false where either is not a blend.
  static bool same_shares(const std::vector<double>& a, const std::vector<double>& b);

 private:
  std::vector<uint32_t> shares_;
  std::vector<uint16_t> source_;  // [kPeriod]: the source of each pick of a period
  std::vector<uint32_t> rank_;    // [kPeriod]: picks of the same source before it in the period
};

}  // namespace lansbert
