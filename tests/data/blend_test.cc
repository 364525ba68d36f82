// BlendSchedule: whole shares that sum to the period, every prefix of the order within the
// bound blend.cc derives of each source's share, each pick's index the count of its source's
// earlier picks (across periods too), the order against a sort of all picks, and the refusals.
#include "lansbert/data/blend.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>
#include <tuple>

namespace lansbert {
namespace {

constexpr uint64_t P = BlendSchedule::kPeriod;

BlendSchedule make(const std::vector<double>& w) {
  BlendSchedule b;
  const Status st = BlendSchedule::create(w, "data.weights", &b);
  EXPECT_TRUE(st.is_ok()) << st.message();
  return b;
}

TEST(Blend, SharesAreLargestRemaindersOfThePeriod) {
  // 0.7 and 0.3 of 65536: 45875.2 and 19660.8; the pick left over goes to the larger fraction.
  BlendSchedule b = make({0.7, 0.3});
  EXPECT_EQ(b.share(0), 45875u);
  EXPECT_EQ(b.share(1), 19661u);
  // Weights need not sum to 1: 2:1:1.
  b = make({2, 1, 1});
  EXPECT_EQ(b.share(0), P / 2);
  EXPECT_EQ(b.share(1), P / 4);
  EXPECT_EQ(b.share(2), P / 4);
  // Three equal thirds: 21845.33 each, one pick left, to the lowest index on the tie.
  b = make({1, 1, 1});
  EXPECT_EQ(b.share(0), 21846u);
  EXPECT_EQ(b.share(1), 21845u);
  EXPECT_EQ(b.share(2), 21845u);
  for (const auto& w : {std::vector<double>{1e-3, 5, 0.25, 7, 0.9, 3.3, 2}, std::vector<double>{1}}) {
    b = make(w);
    uint64_t sum = 0;
    const double total = std::accumulate(w.begin(), w.end(), 0.0);
    for (size_t s = 0; s < w.size(); ++s) {
      sum += b.share(s);
      EXPECT_LT(std::abs(double(b.share(s)) - w[s] / total * double(P)), 1.0) << s;
    }
    EXPECT_EQ(sum, P);
  }
}

// Walks positions [0, n) and checks, for every prefix, each source's count against the bound,
// each pick's index against the count before it, and picks_before at a few places.
void check_order(const std::vector<double>& w, uint64_t n) {
  const BlendSchedule b = make(w);
  const size_t S = w.size();
  std::vector<uint64_t> count(S, 0);
  double worst = 0;
  for (uint64_t k = 0; k < n; ++k) {
    const BlendSchedule::Pick p = b.pick(k);
    ASSERT_LT(p.source, S);
    ASSERT_EQ(p.index, count[p.source]) << "k=" << k;
    ++count[p.source];
    for (size_t s = 0; s < S; ++s) {
      const double dev = std::abs(double(count[s]) - double(k + 1) * b.share(s) / double(P));
      const double bound = 0.5 + double(S) * b.share(s) / (2.0 * double(P));
      worst = std::max(worst, dev / bound);
      ASSERT_LE(dev, bound + 1e-9) << "source " << s << " after " << k + 1 << " picks";
    }
    if (k % 9973 == 0 || k + 1 == n) {
      ASSERT_EQ(b.picks_before(k + 1), count) << k;
    }
  }
  // The bound is near tight somewhere (a schedule that is far better is not this one).
  EXPECT_GT(worst, 0.3);
}

TEST(Blend, EveryPrefixHoldsEachSourceNearItsShare) {
  check_order({0.7, 0.3}, 2 * P + 12345);
  check_order({1, 1, 1}, P + 77);
  check_order({1e-3, 5, 0.25, 7, 0.9, 3.3, 2}, 2 * P + 1);
  check_order({1, 1e-4}, 3 * P);  // 7 picks a period: spread out, not bunched
}

// What docs/data-format.md says of 0.7/0.3: every 32 consecutive positions (any start, across
// the period's end too) hold 22 or 23 of the first source.
TEST(Blend, EveryBatchOf32At70To30Holds22Or23) {
  const BlendSchedule b = make({0.7, 0.3});
  int first = 0;
  for (uint64_t k = 0; k < 32; ++k) first += b.pick(k).source == 0;
  for (uint64_t start = 0; start < P + 64; ++start) {
    ASSERT_TRUE(first == 22 || first == 23) << start << ": " << first;
    first += int(b.pick(start + 32).source == 0) - int(b.pick(start).source == 0);
  }
}

TEST(Blend, SameSharesIsTheSameBlend) {
  EXPECT_TRUE(BlendSchedule::same_shares({1, 1}, {0.5, 0.5}));
  EXPECT_TRUE(BlendSchedule::same_shares({0.7, 0.3}, {7, 3}));
  EXPECT_FALSE(BlendSchedule::same_shares({0.7, 0.3}, {0.3, 0.7}));
  EXPECT_FALSE(BlendSchedule::same_shares({1, 1}, {1, 1, 1}));
  EXPECT_FALSE(BlendSchedule::same_shares({1, 1}, {1, 0}));
}

TEST(Blend, OrderIsAllPicksSortedByTheirTime) {
  // The reference: every pick (j, s) of one period, sorted by (2j+1)/(2 n_s) in long double
  // (exact enough for these shares: no two different times closer than 1/P^2), ties by source.
  const BlendSchedule b = make({3, 1.5, 1, 0.01});
  std::vector<std::tuple<long double, uint32_t, uint64_t>> all;
  for (uint32_t s = 0; s < b.sources(); ++s)
    for (uint64_t j = 0; j < b.share(s); ++j) all.emplace_back((2.0L * j + 1) / (2.0L * b.share(s)), s, j);
  std::sort(all.begin(), all.end());
  ASSERT_EQ(all.size(), P);
  for (uint64_t k = 0; k < P; ++k) {
    const BlendSchedule::Pick p = b.pick(k), next = b.pick(k + P);
    ASSERT_EQ(p.source, std::get<1>(all[k])) << k;
    ASSERT_EQ(p.index, std::get<2>(all[k])) << k;
    // The next period repeats it, each source's index a share further on.
    ASSERT_EQ(next.source, p.source);
    ASSERT_EQ(next.index, p.index + b.share(p.source));
  }
  // Far into a run (a 96K batch's millionth step): each pick's index is the count of its
  // source's picks before it, as picks_before counts them (whole periods, then a scan).
  for (const uint64_t far : {98304ull * 1000000ull + 5, (1ull << 40) + 3 * P / 4, (1ull << 50) - 1}) {
    const BlendSchedule::Pick f = b.pick(far);
    EXPECT_EQ(f.index, b.picks_before(far)[f.source]) << far;
    EXPECT_EQ(b.picks_before(far + 1)[f.source], f.index + 1) << far;
  }
}

TEST(Blend, RefusesWeightsItCannotBlend) {
  BlendSchedule b;
  auto refused = [&](const std::vector<double>& w, const std::string& says) {
    const Status st = BlendSchedule::create(w, "data.weights", &b);
    EXPECT_EQ(st.code(), StatusCode::kInvalidArgument);
    EXPECT_NE(st.message().find(says), std::string::npos) << st.message();
  };
  refused({}, "data.weights: no weights");
  refused({1, 0}, "data.weights[1]: 0 is not a positive number");
  refused({-1, 2}, "data.weights[0]: -1 is not a positive number");
  refused({1, std::nan("")}, "data.weights[1]");
  refused({1, std::numeric_limits<double>::infinity()}, "data.weights[1]");
  refused({1e308, 1e308}, "sum is not finite");
  // 1e-5 of the sum is below 1/65536: the source would get no pick.
  refused({1, 1e-5}, "data.weights[1]: 1e-05 is 1e-05 of the weights' sum, below the blend's resolution 1/65536");
  EXPECT_TRUE(BlendSchedule::create({1, 1.6e-5}, "w", &b).is_ok());
  EXPECT_EQ(b.share(1), 1u);
  // The limit itself: 65,536 equal weights, a pick each (their quotas computed a hair below 1).
  ASSERT_TRUE(BlendSchedule::create(std::vector<double>(P, 0.1), "w", &b).is_ok());
  for (size_t s = 0; s < P; s += 4097) EXPECT_EQ(b.share(s), 1u);
  refused(std::vector<double>(P + 1, 0.1), "data.weights: 65537 sources, more than the 65536");
}

}  // namespace
}  // namespace lansbert
