// The fused linear-layer epilogues (Ops::bias_gelu_*, bias_dropout_residual_forward,
// dropout_bias_backward): bit-identical to the unfused ops they replace (same expressions,
// same order), in fp32 and fp64, with and without dropout, in place where the model calls
// them so, at sizes whose rows do not line up with the dropout generator's 64-element
// groups; and their gradients against fp64 central differences.
#include <gtest/gtest.h>

#include "fd.h"
#include "lansbert/backend/cpu_ops.h"

namespace lansbert {
namespace {

using testing::random_vec;

constexpr int kRows = 37, kCols = 70;  // 2590 elements: groups of 64 straddle rows
const RngKey kKey{1234, 7, 3};

template <typename T>
class FusedTest : public ::testing::Test {};
using FloatTypes = ::testing::Types<float, double>;
TYPED_TEST_SUITE(FusedTest, FloatTypes);

TYPED_TEST(FusedTest, BiasGeluEqualsBiasAddThenGelu) {
  using T = TypeParam;
  auto ops = cpu::make_ops<T>();
  const size_t n = size_t(kRows) * kCols;
  const auto x = testing::cast<T>(random_vec(n, 1, -3, 3)), bias = testing::cast<T>(random_vec(kCols, 2));
  auto pre_a = x, pre_b = x;
  std::vector<T> act_a(n), act_b(n);
  ops->bias_add_forward(pre_a.data(), bias.data(), kRows, kCols);
  ops->gelu_forward(pre_a.data(), act_a.data(), n);
  ops->bias_gelu_forward(pre_b.data(), bias.data(), act_b.data(), kRows, kCols);
  EXPECT_EQ(pre_a, pre_b);
  EXPECT_EQ(act_a, act_b);

  const auto dact = testing::cast<T>(random_vec(n, 3));
  auto db_a = testing::cast<T>(random_vec(kCols, 4)), db_b = db_a;
  std::vector<T> dpre_a(n);
  ops->gelu_backward(dact.data(), pre_a.data(), dpre_a.data(), n);
  ops->bias_add_backward(dpre_a.data(), db_a.data(), kRows, kCols);
  auto dpre_b = dact;  // in place, as the model calls it
  ops->bias_gelu_backward(dpre_b.data(), pre_b.data(), dpre_b.data(), db_b.data(), kRows, kCols);
  EXPECT_EQ(dpre_a, dpre_b);
  EXPECT_EQ(db_a, db_b);
}

TYPED_TEST(FusedTest, BiasDropoutResidualEqualsTheThreeOps) {
  using T = TypeParam;
  auto ops = cpu::make_ops<T>();
  const size_t n = size_t(kRows) * kCols;
  const auto y0 = testing::cast<T>(random_vec(n, 5)), bias = testing::cast<T>(random_vec(kCols, 6));
  const auto res = testing::cast<T>(random_vec(n, 7));
  for (float p : {0.0f, 0.1f, 0.5f}) {
    auto a = y0, b = y0;
    ops->bias_add_forward(a.data(), bias.data(), kRows, kCols);
    ops->dropout_forward(a.data(), a.data(), n, p, kKey);
    ops->accumulate(a.data(), res.data(), n);
    ops->bias_dropout_residual_forward(b.data(), bias.data(), res.data(), kRows, kCols, p, kKey);
    EXPECT_EQ(a, b) << "p " << p;

    const auto dy = testing::cast<T>(random_vec(n, 8));
    std::vector<T> dx_a(n), dx_b(n);
    auto db_a = testing::cast<T>(random_vec(kCols, 9)), db_b = db_a;
    ops->dropout_backward(dy.data(), dx_a.data(), n, p, kKey);
    ops->bias_add_backward(dx_a.data(), db_a.data(), kRows, kCols);
    ops->dropout_bias_backward(dy.data(), dx_b.data(), db_b.data(), kRows, kCols, p, kKey);
    EXPECT_EQ(dx_a, dx_b) << "p " << p;
    EXPECT_EQ(db_a, db_b) << "p " << p;
  }
}

// loss = sum(w * act) with act = gelu(x + bias): dpre = dL/dx, dbias = dL/dbias; both forms.
class FusedGeluGradient : public ::testing::TestWithParam<kern::GeluForm> {};
INSTANTIATE_TEST_SUITE_P(Forms, FusedGeluGradient, ::testing::Values(kern::GeluForm::kErf, kern::GeluForm::kTanh));
TEST_P(FusedGeluGradient, BiasGeluMatchesFiniteDifferences) {
  auto ops = cpu::make_ops<double>();
  ops->set_gelu_form(GetParam());
  const int rows = 5, cols = 7;
  const size_t n = size_t(rows) * cols;
  auto x = random_vec(n, 10, -2, 2), bias = random_vec(cols, 11);
  const auto w = random_vec(n, 12);
  auto loss = [&] {
    std::vector<double> pre = x, act(n);
    ops->bias_gelu_forward(pre.data(), bias.data(), act.data(), rows, cols);
    double s = 0;
    for (size_t i = 0; i < n; ++i) s += w[i] * act[i];
    return s;
  };
  std::vector<double> pre = x, act(n), dpre(n), dbias(cols, 0.0);
  ops->bias_gelu_forward(pre.data(), bias.data(), act.data(), rows, cols);
  ops->bias_gelu_backward(w.data(), pre.data(), dpre.data(), dbias.data(), rows, cols);
  EXPECT_LT(testing::check_gradient(x, dpre, loss), 1e-8);
  EXPECT_LT(testing::check_gradient(bias, dbias, loss), 1e-8);
}

// loss = sum(w * y) with y = dropout(y0 + bias) + residual: dx = dL/dy0, dbias = dL/dbias.
TEST(FusedGradient, BiasDropoutResidualMatchesFiniteDifferences) {
  auto ops = cpu::make_ops<double>();
  const int rows = 6, cols = 9;
  const size_t n = size_t(rows) * cols;
  auto y0 = random_vec(n, 13), bias = random_vec(cols, 14);
  const auto res = random_vec(n, 15), w = random_vec(n, 16);
  const float p = 0.3f;
  auto loss = [&] {
    std::vector<double> y = y0;
    ops->bias_dropout_residual_forward(y.data(), bias.data(), res.data(), rows, cols, p, kKey);
    double s = 0;
    for (size_t i = 0; i < n; ++i) s += w[i] * y[i];
    return s;
  };
  std::vector<double> dx(n), dbias(cols, 0.0);
  ops->dropout_bias_backward(w.data(), dx.data(), dbias.data(), rows, cols, p, kKey);
  EXPECT_LT(testing::check_gradient(y0, dx, loss), 1e-8);
  EXPECT_LT(testing::check_gradient(bias, dbias, loss), 1e-8);
}

}  // namespace
}  // namespace lansbert
