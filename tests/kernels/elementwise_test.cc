// Bias, residual add, GELU, tanh and dropout of the CPU backend: forward against naive
// formulas, backward against fp64 central differences, dropout masks against thread count.
#include <gtest/gtest.h>
#include <omp.h>

#include <cmath>

#include "fd.h"
#include "lansbert/backend/cpu_ops.h"
#include "lansbert/kernels/dropout.h"

namespace lansbert {
namespace {

using testing::check_gradient;
using testing::random_vec;

double weighted_sum(const std::vector<double>& y, const std::vector<double>& w) {
  double s = 0;
  for (size_t i = 0; i < y.size(); ++i) s += y[i] * w[i];
  return s;
}

TEST(BiasAdd, ForwardAndBackward) {
  auto ops = cpu::make_ops<double>();
  const int rows = 7, cols = 67;  // more than one 64-column block
  auto y0 = random_vec(size_t(rows) * cols, 1), bias = random_vec(cols, 2), w = random_vec(y0.size(), 3);
  auto y = y0;
  ops->bias_add_forward(y.data(), bias.data(), rows, cols);
  for (int r = 0; r < rows; ++r)
    for (int c = 0; c < cols; ++c) EXPECT_DOUBLE_EQ(y[r * cols + c], y0[r * cols + c] + bias[c]);
  std::vector<double> db(cols, 0.0);
  ops->bias_add_backward(w.data(), db.data(), rows, cols);
  auto loss = [&] {
    auto yy = y0;
    ops->bias_add_forward(yy.data(), bias.data(), rows, cols);
    return weighted_sum(yy, w);
  };
  EXPECT_LT(check_gradient(bias, db, loss), 1e-8);
}

TEST(Add, ForwardAndAccumulate) {
  auto ops = cpu::make_ops<double>();
  auto a = random_vec(13, 1), b = random_vec(13, 2);
  std::vector<double> y(13);
  ops->add_forward(a.data(), b.data(), y.data(), 13);
  for (int i = 0; i < 13; ++i) EXPECT_DOUBLE_EQ(y[i], a[i] + b[i]);
  ops->accumulate(y.data(), a.data(), 13);
  for (int i = 0; i < 13; ++i) EXPECT_DOUBLE_EQ(y[i], 2 * a[i] + b[i]);
}

TEST(Gelu, ForwardMatchesErfFormAndBackwardMatchesFiniteDifferences) {
  auto ops = cpu::make_ops<double>();
  auto x = random_vec(101, 4, -5, 5), w = random_vec(101, 5);
  std::vector<double> y(101), dx(101);
  ops->gelu_forward(x.data(), y.data(), x.size());
  for (size_t i = 0; i < x.size(); ++i)
    EXPECT_NEAR(y[i], 0.5 * x[i] * (1 + std::erf(x[i] / std::sqrt(2.0))), 1e-15);
  ops->gelu_backward(w.data(), x.data(), dx.data(), x.size());
  auto loss = [&] {
    std::vector<double> yy(x.size());
    ops->gelu_forward(x.data(), yy.data(), x.size());
    return weighted_sum(yy, w);
  };
  EXPECT_LT(check_gradient(x, dx, loss), 1e-8);
}

// model.hidden_act: gelu_tanh. The naive reference is the textbook formula with std::tanh.
TEST(Gelu, TanhFormMatchesItsFormulaAndBackwardMatchesFiniteDifferences) {
  auto ops = cpu::make_ops<double>();
  ops->set_gelu_form(kern::GeluForm::kTanh);
  auto x = random_vec(101, 4, -6, 6), w = random_vec(101, 5);
  std::vector<double> y(101), dx(101);
  ops->gelu_forward(x.data(), y.data(), x.size());
  double farthest_from_erf = 0;
  for (size_t i = 0; i < x.size(); ++i) {
    const double u = std::sqrt(2 / M_PI) * (x[i] + 0.044715 * x[i] * x[i] * x[i]);
    EXPECT_NEAR(y[i], 0.5 * x[i] * (1 + std::tanh(u)), 1e-15);
    farthest_from_erf = std::max(farthest_from_erf, std::abs(y[i] - 0.5 * x[i] * (1 + std::erf(x[i] / std::sqrt(2.0)))));
  }
  EXPECT_GT(farthest_from_erf, 1e-5);  // the form reached the loop: not the erf GELU
  EXPECT_LT(farthest_from_erf, 4.8e-4);
  ops->gelu_backward(w.data(), x.data(), dx.data(), x.size());
  auto loss = [&] {
    std::vector<double> yy(x.size());
    ops->gelu_forward(x.data(), yy.data(), x.size());
    return weighted_sum(yy, w);
  };
  EXPECT_LT(check_gradient(x, dx, loss), 1e-8);
}

TEST(Tanh, ForwardAndBackward) {
  auto ops = cpu::make_ops<double>();
  auto x = random_vec(37, 6, -3, 3), w = random_vec(37, 7);
  std::vector<double> y(37), dx(37);
  ops->tanh_forward(x.data(), y.data(), 37);
  for (int i = 0; i < 37; ++i) EXPECT_DOUBLE_EQ(y[i], std::tanh(x[i]));
  ops->tanh_backward(w.data(), y.data(), dx.data(), 37);
  auto loss = [&] {
    std::vector<double> yy(37);
    ops->tanh_forward(x.data(), yy.data(), 37);
    return weighted_sum(yy, w);
  };
  EXPECT_LT(check_gradient(x, dx, loss), 1e-8);
}

TEST(Dropout, KeepsAboutOneMinusPAndScales) {
  auto ops = cpu::make_ops<float>();
  const size_t n = 1 << 16;
  std::vector<float> x(n, 1.0f), y(n);
  const float p = 0.1f;
  ops->dropout_forward(x.data(), y.data(), n, p, RngKey{7, 3, 2});
  size_t kept = 0;
  for (float v : y) {
    if (v != 0) {
      ++kept;
      EXPECT_FLOAT_EQ(v, 1.0f / 0.9f);
    }
  }
  // Binomial(n, 0.9): sd = sqrt(n * 0.09) ~ 77; allow 5 sd.
  EXPECT_NEAR(double(kept), 0.9 * n, 5 * 77.0);
}

TEST(Dropout, MaskIsIdenticalForOneAndTwoThreadsAndInBackward) {
  auto ops = cpu::make_ops<double>();
  const size_t n = (size_t(1) << 17) + 3;  // above the one-thread cutoff, so two threads split it
  auto x = random_vec(n, 8);
  std::vector<double> y1(n), y2(n), dx(n);
  const RngKey key{123, 45, 6};
  const int saved = omp_get_max_threads();
  omp_set_num_threads(1);
  ops->dropout_forward(x.data(), y1.data(), n, 0.25f, key);
  omp_set_num_threads(2);
  ops->dropout_forward(x.data(), y2.data(), n, 0.25f, key);
  omp_set_num_threads(saved);
  EXPECT_EQ(y1, y2);
  // Backward redraws the same mask: dx is zero exactly where y is zero, scaled the same.
  std::vector<double> ones(n, 1.0);
  ops->dropout_backward(ones.data(), dx.data(), n, 0.25f, key);
  for (size_t i = 0; i < n; ++i) EXPECT_DOUBLE_EQ(y1[i], x[i] * dx[i]);
}

TEST(Dropout, BackwardMatchesFiniteDifferences) {
  auto ops = cpu::make_ops<double>();
  auto x = random_vec(53, 9), w = random_vec(53, 10);
  std::vector<double> dx(53);
  const RngKey key{1, 2, 3};
  ops->dropout_backward(w.data(), dx.data(), 53, 0.3f, key);
  auto loss = [&] {
    std::vector<double> yy(53);
    ops->dropout_forward(x.data(), yy.data(), 53, 0.3f, key);
    return weighted_sum(yy, w);
  };
  EXPECT_LT(check_gradient(x, dx, loss), 1e-8);
}

}  // namespace
}  // namespace lansbert

namespace lansbert {
namespace {

TEST(Dropout, BlockedLauncherMatchesPerElementDefinition) {
  // The launcher draws one Philox block per four elements; the definition is per element.
  auto ops = cpu::make_ops<float>();
  const size_t n = 4099;
  std::vector<float> x(n), y(n);
  for (size_t i = 0; i < n; ++i) x[i] = float(i % 13) - 6.0f;
  const RngKey key{99, 12, 5};
  ops->dropout_forward(x.data(), y.data(), n, 0.4f, key);
  for (size_t i = 0; i < n; ++i) EXPECT_EQ(y[i], kern::dropout_apply(x[i], key, i, 0.4f)) << i;
}

}  // namespace
}  // namespace lansbert
