// Masked attention softmax of the CPU backend: forward against a naive masked softmax,
// a fully padded row stays finite (all zeros), backward against fp64 central differences; the
// tile summaries (kern::mask_span) the flash kernels skip unseen tiles by.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>

#include "fd.h"
#include "lansbert/backend/cpu_ops.h"
#include "lansbert/kernels/softmax.h"

namespace lansbert {
namespace {

using testing::check_gradient;
using testing::random_vec;

constexpr int kB = 2, kA = 3, kS = 7;

std::vector<int32_t> key_mask() {
  // Sequence 0 has 5 real tokens, sequence 1 has 7.
  std::vector<int32_t> m(kB * kS, 1);
  m[5] = m[6] = 0;
  return m;
}

TEST(Softmax, ForwardMatchesNaiveMaskedSoftmax) {
  auto ops = cpu::make_ops<double>();
  auto x = random_vec(kB * kA * kS * kS, 1, -4, 4);
  auto mask = key_mask();
  std::vector<double> p(x.size());
  const double scale = 0.37;
  ops->softmax_forward(x.data(), mask.data(), p.data(), kB, kA, kS, scale);
  for (int r = 0; r < kB * kA * kS; ++r) {
    const int b = r / (kA * kS);
    double sum = 0;
    for (int j = 0; j < kS; ++j) sum += mask[b * kS + j] ? std::exp(scale * x[r * kS + j]) : 0;
    for (int j = 0; j < kS; ++j) {
      const double e = mask[b * kS + j] ? std::exp(scale * x[r * kS + j]) / sum : 0;
      EXPECT_NEAR(p[r * kS + j], e, 1e-14);
    }
  }
}

// A packed row (data/packing.h) numbers its sequences in the mask: a query sees the keys of its
// own sequence only, and a padding query (0) every token, as in BERT's mask.
TEST(Softmax, PackedRowSeesOnlyItsOwnSequence) {
  auto ops = cpu::make_ops<double>();
  const std::vector<int32_t> mask = {1, 1, 2, 2, 2, 3, 0,   // three sequences and padding
                                     1, 1, 1, 1, 1, 1, 1};  // one
  auto x = random_vec(kB * kA * kS * kS, 4, -4, 4);
  std::vector<double> p(x.size());
  const double scale = 0.41;
  ops->softmax_forward(x.data(), mask.data(), p.data(), kB, kA, kS, scale);
  for (int r = 0; r < kB * kA * kS; ++r) {
    const int b = r / (kA * kS), q = r % kS;
    const int32_t mine = mask[b * kS + q];
    auto seen = [&](int j) { return mask[b * kS + j] != 0 && (mine == 0 || mask[b * kS + j] == mine); };
    double sum = 0;
    for (int j = 0; j < kS; ++j) sum += seen(j) ? std::exp(scale * x[r * kS + j]) : 0;
    for (int j = 0; j < kS; ++j) EXPECT_NEAR(p[r * kS + j], seen(j) ? std::exp(scale * x[r * kS + j]) / sum : 0, 1e-14);
  }
  EXPECT_EQ(p[5 * kS + 5], 1.0);  // query 5 of head 0: a sequence of one token
}

// kern::span_may_see, which the flash kernels skip tiles by, against every (query, key) pair of
// the two tiles: never false while a pair is visible, on any mask; and on packed rows (sequences
// in order, padding last) never true without one, so every unseen tile is skipped.
TEST(Softmax, MaskSpanSkipsOnlyTilesNoQuerySees) {
  std::mt19937 rng(11);
  const int n = 24;
  int skipped = 0, pairs = 0;
  for (int trial = 0; trial < 400; ++trial) {
    const bool packed = trial % 2 == 0;
    std::vector<int32_t> mask(n, 0);
    if (packed) {  // sequences 1, 2, ... of random lengths, then padding
      int at = 0, id = 1;
      const int used = int(rng() % (n + 1));
      while (at < used) {
        const int len = std::min(used - at, 1 + int(rng() % 9));
        for (int i = 0; i < len; ++i) mask[at++] = id;
        ++id;
      }
    } else {  // any values, in any order
      for (int32_t& v : mask) v = int32_t(rng() % 4);
    }
    const int q0 = int(rng() % n), k0 = int(rng() % n);
    const int nq = 1 + int(rng() % (n - q0)), nk = 1 + int(rng() % (n - k0));
    bool visible = false;
    for (int q = q0; q < q0 + nq; ++q)
      for (int k = k0; k < k0 + nk; ++k) visible = visible || kern::attention_visible(mask[k], mask[q]);
    const bool may = kern::span_may_see(kern::mask_span(mask.data() + k0, nk), kern::mask_span(mask.data() + q0, nq));
    if (visible) {
      EXPECT_TRUE(may) << "trial " << trial << ": a visible pair in a tile said unseen";
    }
    if (packed) {
      EXPECT_EQ(may, visible) << "trial " << trial << ": packed tiles";
    }
    skipped += !may;
    ++pairs;
  }
  EXPECT_GT(skipped, pairs / 10);  // the trials do reach tiles to skip
  EXPECT_FALSE(kern::span_may_see(kern::mask_span(nullptr, 0), kern::MaskSpan{1, 3, true}));  // no key
  EXPECT_FALSE(kern::span_may_see(kern::MaskSpan{1, 3, false}, kern::mask_span(nullptr, 0)));  // no query
}

TEST(Softmax, FullyPaddedRowIsFiniteZero) {
  auto ops = cpu::make_ops<float>();
  // One sequence, one head: S query rows of S keys, every key padding.
  std::vector<float> x(kS * kS, 1e30f), p(kS * kS, -1.0f);
  std::vector<int32_t> mask(kS, 0);
  ops->softmax_forward(x.data(), mask.data(), p.data(), 1, 1, kS, 1.0f);
  for (float v : p) EXPECT_EQ(v, 0.0f);
  std::vector<float> dp(kS * kS, 1.0f), dx(kS * kS, -1.0f);
  ops->softmax_backward(dp.data(), p.data(), dx.data(), 1, 1, kS, 1.0f);
  for (float v : dx) EXPECT_EQ(v, 0.0f);
}

TEST(Softmax, BackwardMatchesFiniteDifferences) {
  auto ops = cpu::make_ops<double>();
  auto x = random_vec(kB * kA * kS * kS, 2, -2, 2), w = random_vec(x.size(), 3);
  auto mask = key_mask();
  const double scale = 0.5;
  std::vector<double> p(x.size()), dx(x.size());
  ops->softmax_forward(x.data(), mask.data(), p.data(), kB, kA, kS, scale);
  ops->softmax_backward(w.data(), p.data(), dx.data(), kB, kA, kS, scale);
  auto loss = [&] {
    std::vector<double> pp(x.size());
    ops->softmax_forward(x.data(), mask.data(), pp.data(), kB, kA, kS, scale);
    double s = 0;
    for (size_t i = 0; i < pp.size(); ++i) s += pp[i] * w[i];
    return s;
  };
  EXPECT_LT(check_gradient(x, dx, loss), 1e-8);
}

// The fused softmax + attention dropout pair equals softmax then dropout (forward) and
// dropout then softmax backward (backward) over the whole [B, A, S, S] tensor, bit for bit.
TEST(Softmax, DropoutFusedPairEqualsTheComposition) {
  auto ops = cpu::make_ops<double>();
  const int B = 2, A = 3, S = 9;
  const size_t n = size_t(B) * A * S * S;
  const RngKey key{77, 5, 2};
  const auto x = testing::random_vec(n, 31, -3, 3);
  auto g = testing::random_vec(n, 32);
  std::vector<int32_t> mask(size_t(B) * S, 1);
  for (int s = 6; s < S; ++s) mask[S + s] = 0;
  std::vector<double> p1(n), d1(n), p2(n), d2(n), ds1(n), ds2(n), g1 = g;
  ops->softmax_forward(x.data(), mask.data(), p1.data(), B, A, S, 0.5);
  ops->dropout_forward(p1.data(), d1.data(), n, 0.2f, key);
  ops->softmax_dropout_forward(x.data(), mask.data(), p2.data(), d2.data(), B, A, S, 0.5, 0.2f, key);
  EXPECT_EQ(p1, p2);
  EXPECT_EQ(d1, d2);
  ops->dropout_backward(g1.data(), g1.data(), n, 0.2f, key);
  ops->softmax_backward(g1.data(), p1.data(), ds1.data(), B, A, S, 0.5);
  ops->dropout_softmax_backward(g.data(), p2.data(), ds2.data(), B, A, S, 0.5, 0.2f, key);
  EXPECT_EQ(ds1, ds2);
}

}  // namespace
}  // namespace lansbert
