// The dense layer pair (src/model/linear.h): forward against a naive loop, and dx, dW, db
// against fp64 central differences, including the accumulate-dx mode used for residuals.
#include <gtest/gtest.h>

#include "../../src/model/linear.h"
#include "fd.h"
#include "lansbert/backend/cpu_ops.h"

namespace lansbert {
namespace {

using testing::check_gradient;
using testing::random_vec;

TEST(Linear, ForwardAndBackward) {
  auto ops = cpu::make_ops<double>();
  const int n = 5, in = 7, out = 3;
  auto x = random_vec(n * in, 1), w = random_vec(out * in, 2), b = random_vec(out, 3);
  auto dyw = random_vec(n * out, 4);
  std::vector<double> y(n * out);
  linear_forward(*ops, x.data(), w.data(), b.data(), y.data(), n, in, out);
  for (int i = 0; i < n; ++i)
    for (int o = 0; o < out; ++o) {
      double s = b[o];
      for (int k = 0; k < in; ++k) s += x[i * in + k] * w[o * in + k];
      EXPECT_NEAR(y[i * out + o], s, 1e-12);
    }
  auto loss = [&] {
    std::vector<double> yy(n * out);
    linear_forward(*ops, x.data(), w.data(), b.data(), yy.data(), n, in, out);
    double s = 0;
    for (size_t i = 0; i < yy.size(); ++i) s += yy[i] * dyw[i];
    return s;
  };
  std::vector<double> dx(n * in, 5.0), dw(out * in, 0.0), db(out, 0.0);
  linear_backward(*ops, dyw.data(), x.data(), w.data(), dx.data(), dw.data(), db.data(), n, in, out);
  EXPECT_LT(check_gradient(x, dx, loss), 1e-8);
  EXPECT_LT(check_gradient(w, dw, loss), 1e-8);
  EXPECT_LT(check_gradient(b, db, loss), 1e-8);
  // Accumulate mode adds to what dx held.
  std::vector<double> dx2 = dx;
  std::vector<double> dw2(out * in, 0.0), db2(out, 0.0);
  linear_backward(*ops, dyw.data(), x.data(), w.data(), dx2.data(), dw2.data(), db2.data(), n, in, out, {.accumulate_dx = true});
  for (size_t i = 0; i < dx.size(); ++i) EXPECT_NEAR(dx2[i], 2 * dx[i], 1e-12);
}

// In bf16 the backward rounds dy once for both of its GEMMs: without a bias by a cast
// (Ops::keep_gemm_operand), with one in the bias-gradient sums, which write dy's copy as they
// read it (Ops::bias_add_backward_kept). Then w for dx and x for dW are cast, and nothing else;
// the results are the same either way.
TEST(Linear, Bf16BackwardRoundsDyOnce) {
  const int n = 6, in = 5, out = 4;
  const auto x = testing::cast<float>(random_vec(n * in, 1)), w = testing::cast<float>(random_vec(out * in, 2)),
             dy = testing::cast<float>(random_vec(n * out, 3));
  std::vector<float> dx(n * in), dw(out * in, 0.f), db(out, 0.f);
  auto cast = cpu::make_ops<float>(GemmMath::kBf16);
  linear_backward(*cast, dy.data(), x.data(), w.data(), dx.data(), dw.data(), nullptr, n, in, out);
  EXPECT_EQ(cast->gemm_operand_conversions(), size_t(n * out + out * in + n * in));
  EXPECT_EQ(cast->gemm_operand_copy_writes(), 0u);
  cast->bias_add_backward(dy.data(), db.data(), n, out);

  auto sums = cpu::make_ops<float>(GemmMath::kBf16);
  std::vector<float> dx2(n * in), dw2(out * in, 0.f), db2(out, 0.f);
  linear_backward(*sums, dy.data(), x.data(), w.data(), dx2.data(), dw2.data(), db2.data(), n, in, out);
  EXPECT_EQ(sums->gemm_operand_conversions(), size_t(out * in + n * in));
  EXPECT_EQ(sums->gemm_operand_copy_writes(), size_t(n * out));
  EXPECT_EQ(dx, dx2);
  EXPECT_EQ(dw, dw2);
  EXPECT_EQ(db, db2);
}

}  // namespace
}  // namespace lansbert
