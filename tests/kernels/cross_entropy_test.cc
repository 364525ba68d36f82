// Softmax cross-entropy with an ignore label on the CPU: losses and accuracy against a naive
// log-sum-exp, ignored rows contribute nothing, backward against fp64 central differences.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>

#include "fd.h"
#include "lansbert/backend/cpu_ops.h"

namespace lansbert {
namespace {

using testing::check_gradient;
using testing::random_vec;

constexpr int kRows = 5, kClasses = 11;
const std::vector<int32_t> kLabels = {3, -1, 10, 0, 7};

TEST(CrossEntropy, ForwardMatchesNaive) {
  auto ops = cpu::make_ops<double>();
  auto x = random_vec(kRows * kClasses, 1, -6, 6);
  x[2 * kClasses + 10] = 50;  // row 2 predicts its label
  x[0 * kClasses + 3] = -50;  // row 0, finite, does not
  std::vector<double> losses(kRows);
  std::vector<int32_t> correct(kRows);
  ops->cross_entropy_forward(x.data(), kLabels.data(), losses.data(), correct.data(), kRows, kClasses);
  for (int r = 0; r < kRows; ++r) {
    if (kLabels[r] < 0) {
      EXPECT_EQ(losses[r], 0.0);
      EXPECT_EQ(correct[r], 0);
      continue;
    }
    double s = 0;
    for (int j = 0; j < kClasses; ++j) s += std::exp(x[r * kClasses + j]);
    EXPECT_NEAR(losses[r], std::log(s) - x[r * kClasses + kLabels[r]], 1e-12);
    // correct is argmax == label in every row: 1 in row 2, 0 in row 0 (and the others as they fall).
    const double* row = x.data() + r * kClasses;
    EXPECT_EQ(correct[r], int(std::max_element(row, row + kClasses) - row == kLabels[r])) << "row " << r;
  }
  EXPECT_EQ(correct[2], 1);
  EXPECT_EQ(correct[0], 0);
}

TEST(CrossEntropy, LargeLogitsStayFinite) {
  auto ops = cpu::make_ops<float>();
  std::vector<float> x = {1e4f, -1e4f, 3e4f};
  std::vector<int32_t> label = {1};
  float loss;
  int32_t correct;
  ops->cross_entropy_forward(x.data(), label.data(), &loss, &correct, 1, 3);
  EXPECT_FLOAT_EQ(loss, 4e4f);
  std::vector<float> dx(3);
  ops->cross_entropy_backward(x.data(), label.data(), dx.data(), 1, 3, 1.0f);
  for (float v : dx) EXPECT_TRUE(std::isfinite(v));
}

// A diverged model's logits: rows holding NaN give a NaN loss (the trainer's divergence check
// stops the run) and no prediction, without reading past the row (the argmax search once
// looked for an element equal to a NaN maximum). Such a row predicts class 0, as the CUDA
// kernel's search from x[0] does.
TEST(CrossEntropy, NonFiniteLogitsGiveNaNLossNotACrash) {
  auto ops = cpu::make_ops<float>();
  const float nan = std::nanf(""), inf = INFINITY;
  // Row 0 all NaN, row 1 one NaN, row 2 an infinity, row 3 finite: the last row of a large
  // buffer, so a search past a row's end would leave the allocation.
  const int rows = 4, classes = 3;
  std::vector<float> x = {nan, nan, nan, 1, nan, 2, 0, inf, 1, 0, 3, 1};
  std::vector<int32_t> labels = {2, 1, 1, 1};
  std::vector<float> loss(rows);
  std::vector<int32_t> correct(rows, 7);
  ops->cross_entropy_forward(x.data(), labels.data(), loss.data(), correct.data(), rows, classes);
  EXPECT_TRUE(std::isnan(loss[0]));
  EXPECT_EQ(correct[0], 0);
  EXPECT_TRUE(std::isnan(loss[1]) || std::isfinite(loss[1]));  // defined, whatever max sees
  EXPECT_EQ(correct[2], 1);  // the infinite logit is the prediction
  EXPECT_FLOAT_EQ(loss[3], std::log(1 + std::exp(3.0f) + std::exp(1.0f)) - 3.0f);
  EXPECT_EQ(correct[3], 1);
}

TEST(CrossEntropy, BackwardMatchesFiniteDifferences) {
  auto ops = cpu::make_ops<double>();
  auto x = random_vec(kRows * kClasses, 2, -3, 3);
  std::vector<double> dx(x.size());
  const double weight = 0.25;
  ops->cross_entropy_backward(x.data(), kLabels.data(), dx.data(), kRows, kClasses, weight);
  for (int j = 0; j < kClasses; ++j) EXPECT_EQ(dx[1 * kClasses + j], 0.0);  // ignored row
  auto loss = [&] {
    std::vector<double> l(kRows);
    std::vector<int32_t> c(kRows);
    ops->cross_entropy_forward(x.data(), kLabels.data(), l.data(), c.data(), kRows, kClasses);
    double s = 0;
    for (double v : l) s += weight * v;
    return s;
  };
  EXPECT_LT(check_gradient(x, dx, loss), 1e-8);
}

}  // namespace
}  // namespace lansbert
