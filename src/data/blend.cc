// BlendSchedule: shares by largest remainders, one period ordered by stride scheduling.
//
// Why the prefix bound holds (blend.h): let t be the time of the k-th pick. A source of
// share n has ceil(t*n - 1/2) picks strictly before t and floor(t*n + 1/2) at or before it,
// so among the first k picks it has c with |c - t*n| <= 1/2. Summed over the S sources,
// |k - t*kPeriod| <= S/2, so |c - k*n/kPeriod| <= 1/2 + S*n/(2*kPeriod).
#include "lansbert/data/blend.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <numeric>
#include <queue>

#include "lansbert/core/check.h"

namespace lansbert {

Status BlendSchedule::shares(const std::vector<double>& weights, const std::string& what, std::vector<uint32_t>* out) {
  if (weights.empty()) return Status::invalid_argument(what + ": no weights");
  if (weights.size() > kPeriod)
    return Status::invalid_argument(fmt::format("{}: {} sources, more than the {} a blend can tell apart", what,
                                                weights.size(), kPeriod));
  double sum = 0;
  for (size_t s = 0; s < weights.size(); ++s) {
    if (!std::isfinite(weights[s]) || weights[s] <= 0)
      return Status::invalid_argument(fmt::format("{}[{}]: {} is not a positive number", what, s, weights[s]));
    sum += weights[s];
  }
  if (!std::isfinite(sum)) return Status::invalid_argument(what + ": the weights' sum is not finite");
  // Whole shares: each source its quota's floor, then the picks left over to the largest
  // fractional parts (ties to the lower index), so shares sum to kPeriod exactly.
  std::vector<uint32_t> shares(weights.size());
  std::vector<double> fraction(weights.size());
  uint64_t given = 0;
  for (size_t s = 0; s < weights.size(); ++s) {
    const double quota = weights[s] / sum * kPeriod;
    // A quota of exactly 1 (65,536 equal weights) may be computed a rounding error below it.
    const double whole = std::floor(quota + 1e-9);
    if (whole < 1)
      return Status::invalid_argument(fmt::format(
          "{}[{}]: {} is {:.3g} of the weights' sum, below the blend's resolution 1/{}: the source would get no "
          "samples (raise its weight, or leave it out)", what, s, weights[s], weights[s] / sum, kPeriod));
    shares[s] = uint32_t(whole);
    fraction[s] = quota - whole;
    given += shares[s];
  }
  std::vector<size_t> by_fraction(weights.size());
  std::iota(by_fraction.begin(), by_fraction.end(), size_t(0));
  std::stable_sort(by_fraction.begin(), by_fraction.end(),
                   [&](size_t a, size_t b) { return fraction[a] > fraction[b]; });
  // The floors fall short of kPeriod by less than one pick a source (the fractions' sum);
  // the loop hands out exactly that shortfall, at most one pick to each source.
  LB_CHECK(given <= kPeriod && kPeriod - given <= weights.size());
  for (size_t i = 0; given < kPeriod; ++i, ++given) ++shares[by_fraction[i]];
  *out = std::move(shares);
  return Status::ok();
}

Status BlendSchedule::create(const std::vector<double>& weights, const std::string& what, BlendSchedule* out) {
  std::vector<uint32_t> shares;
  LB_RETURN_IF_ERROR(BlendSchedule::shares(weights, what, &shares));
  // The period's order: the j-th pick of source s at time (2j + 1) / (2 n_s), compared
  // exactly as (2j + 1) * n_t < (2i + 1) * n_s; the heap holds each source's next pick.
  struct Next {
    uint64_t odd;  // 2j + 1
    uint32_t source;
  };
  auto later = [&](const Next& a, const Next& b) {
    const uint64_t lhs = a.odd * shares[b.source], rhs = b.odd * shares[a.source];
    return lhs != rhs ? lhs > rhs : a.source > b.source;
  };
  std::priority_queue<Next, std::vector<Next>, decltype(later)> heap(later);
  for (uint32_t s = 0; s < shares.size(); ++s) heap.push({1, s});
  out->source_.assign(kPeriod, 0);
  out->rank_.assign(kPeriod, 0);
  for (uint32_t k = 0; k < kPeriod; ++k) {
    const Next n = heap.top();
    heap.pop();
    out->source_[k] = uint16_t(n.source);
    out->rank_[k] = uint32_t(n.odd / 2);
    if (n.odd / 2 + 1 < shares[n.source]) heap.push({n.odd + 2, n.source});
  }
  out->shares_ = std::move(shares);
  return Status::ok();
}

BlendSchedule::Pick BlendSchedule::pick(uint64_t k) const {
  const uint64_t period = k / kPeriod;
  const uint32_t at = uint32_t(k % kPeriod);
  const uint32_t s = source_[at];
  return {s, period * shares_[s] + rank_[at]};
}

std::vector<uint64_t> BlendSchedule::picks_before(uint64_t k) const {
  std::vector<uint64_t> n(shares_.size());
  for (size_t s = 0; s < shares_.size(); ++s) n[s] = (k / kPeriod) * shares_[s];
  const uint32_t partial = uint32_t(k % kPeriod);
  for (uint32_t at = 0; at < partial; ++at) ++n[source_[at]];
  return n;
}

bool BlendSchedule::same_shares(const std::vector<double>& a, const std::vector<double>& b) {
  std::vector<uint32_t> x, y;
  return shares(a, "", &x).is_ok() && shares(b, "", &y).is_ok() && x == y;
}

}  // namespace lansbert
