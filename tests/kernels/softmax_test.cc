// Masked attention softmax of the CPU backend: forward against a naive masked softmax,
// a fully padded row stays finite (all zeros), backward against fp64 central differences.
#include <gtest/gtest.h>

#include <cmath>

#include "fd.h"
#include "lansbert/backend/cpu_ops.h"

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

}  // namespace
}  // namespace lansbert
