// LayerNorm of the CPU backend: forward against a naive two-pass formula, backward (dx,
// dgamma, dbeta) against fp64 central differences, at sizes spanning two column blocks.
#include <gtest/gtest.h>

#include <cmath>

#include "fd.h"
#include "lansbert/backend/cpu_ops.h"

namespace lansbert {
namespace {

using testing::check_gradient;
using testing::random_vec;

constexpr int kRows = 5, kCols = 71;
// Not BERT's 1e-12: an eps that changes the result by far more than the tolerances, so that
// where it sits (inside the root) and that the argument is used are both checked.
constexpr double kEps = 0.1;

TEST(LayerNorm, ForwardMatchesNaive) {
  auto ops = cpu::make_ops<double>();
  auto x = random_vec(kRows * kCols, 1), g = random_vec(kCols, 2), b = random_vec(kCols, 3);
  std::vector<double> y(x.size()), mean(kRows), rstd(kRows);
  ops->layernorm_forward(x.data(), g.data(), b.data(), y.data(), mean.data(), rstd.data(), kRows, kCols, kEps);
  for (int r = 0; r < kRows; ++r) {
    double m = 0, v = 0;
    for (int c = 0; c < kCols; ++c) m += x[r * kCols + c] / kCols;
    for (int c = 0; c < kCols; ++c) v += (x[r * kCols + c] - m) * (x[r * kCols + c] - m) / kCols;
    for (int c = 0; c < kCols; ++c)
      EXPECT_NEAR(y[r * kCols + c], (x[r * kCols + c] - m) / std::sqrt(v + kEps) * g[c] + b[c], 1e-12);
  }
}

TEST(LayerNorm, BackwardMatchesFiniteDifferences) {
  auto ops = cpu::make_ops<double>();
  auto x = random_vec(kRows * kCols, 4), g = random_vec(kCols, 5), b = random_vec(kCols, 6);
  auto w = random_vec(x.size(), 7);
  std::vector<double> y(x.size()), mean(kRows), rstd(kRows), dx(x.size());
  std::vector<double> dg(kCols, 0.0), db(kCols, 0.0);
  auto loss = [&] {
    std::vector<double> yy(x.size()), mm(kRows), rr(kRows);
    ops->layernorm_forward(x.data(), g.data(), b.data(), yy.data(), mm.data(), rr.data(), kRows, kCols, kEps);
    double s = 0;
    for (size_t i = 0; i < yy.size(); ++i) s += yy[i] * w[i];
    return s;
  };
  ops->layernorm_forward(x.data(), g.data(), b.data(), y.data(), mean.data(), rstd.data(), kRows, kCols, kEps);
  ops->layernorm_backward(w.data(), x.data(), g.data(), mean.data(), rstd.data(), dx.data(), dg.data(), db.data(), kRows, kCols);
  EXPECT_LT(check_gradient(x, dx, loss), 1e-7);
  EXPECT_LT(check_gradient(g, dg, loss), 1e-7);
  EXPECT_LT(check_gradient(b, db, loss), 1e-7);
}

}  // namespace
}  // namespace lansbert
