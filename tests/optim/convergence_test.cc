// Convergence: each optimizer, driven by the Updater with the LANS schedule, minimises a
// noise-free least-squares problem (loss 0 at the optimum) by a stated factor within a stated
// number of updates. Not a speed test: it catches sign errors, lost updates and stuck ratios.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>

#include "lansbert/optim/updater.h"
#include "optim_test_util.h"

namespace lansbert {
namespace {

// loss(x, c) = 1/(2N) sum_i (a_i . x + c - y_i)^2 with y = A x* + c*; A is N x D.
struct LeastSquares {
  static constexpr int N = 64, D = 16;
  std::vector<double> a, y;
  LeastSquares() : a(N * D), y(N) {
    testing::Lcg r(3);
    std::vector<double> xs(D);
    for (double& e : a) e = r.next();
    for (double& e : xs) e = r.next();
    for (int i = 0; i < N; ++i) {
      y[i] = 0.5;  // c* = 0.5
      for (int j = 0; j < D; ++j) y[i] += a[i * D + j] * xs[j];
    }
  }
  // Returns the loss and writes the gradient (x at p[0..D), c at p[cb]).
  double loss_and_grad(const float* x, float c, float* gx, float* gc) const {
    double loss = 0, dc = 0;
    std::vector<double> dx(D, 0);
    for (int i = 0; i < N; ++i) {
      double r = c - y[i];
      for (int j = 0; j < D; ++j) r += a[i * D + j] * x[j];
      loss += r * r / (2 * N);
      dc += r / N;
      for (int j = 0; j < D; ++j) dx[j] += a[i * D + j] * r / N;
    }
    for (int j = 0; j < D; ++j) gx[j] = static_cast<float>(dx[j]);
    *gc = static_cast<float>(dc);
    return loss;
  }
};

// Returns final loss / initial loss after `steps` updates.
double run(const std::string& name, double peak_lr, int steps, bool nvlamb = false) {
  ParamTable t;
  t.add("x", {LeastSquares::D}, ParamRole::kWeight);
  t.add("c", {1}, ParamRole::kBias);
  testing::Flat f(t);
  testing::Lcg r(11);
  for (int j = 0; j < LeastSquares::D; ++j)
    f.p[t[0].offset + j] = static_cast<float>(0.1 * r.next());
  UpdaterConfig c;
  c.optimizer.name = name;
  c.optimizer.weight_decay = 0;
  c.optimizer.trust_ratio_on_excluded = nvlamb;
  c.schedule.peak_lr = peak_lr;
  c.schedule.total_steps = steps;
  std::unique_ptr<Updater> u;
  EXPECT_TRUE(Updater::create(c, &u).is_ok());
  LeastSquares ls;
  const size_t xo = t[0].offset, co = t[1].offset;
  const double l0 = ls.loss_and_grad(&f.p[xo], f.p[co], &f.g[xo], &f.g[co]);
  for (int s = 0; s < steps; ++s) {
    ls.loss_and_grad(&f.p[xo], f.p[co], &f.g[xo], &f.g[co]);
    EXPECT_TRUE(u->step(t, f.buffers(), nullptr).is_ok());
  }
  const double l1 = ls.loss_and_grad(&f.p[xo], f.p[co], &f.g[xo], &f.g[co]);
  std::printf("%s%s: loss %.6g -> %.6g (factor %.3g) in %d updates\n", name.c_str(),
              nvlamb ? " (nvlamb)" : "", l0, l1, l0 / l1, steps);
  return l1 / l0;
}

// Stated target: every optimizer reduces the loss at least 10^4-fold within 300 updates
// (peak lr 0.05, LANS schedule 5% warmup / 25% constant / linear decay, wd 0). Observed on
// the development machine: LANS ~3e7, NVLAMB ~7e5, LAMB and AdamW ~3e12. With wd = 0 on every block
// apex LAMB applies no trust ratio and equals AdamW, so NVLAMB is run as well.
TEST(Convergence, LansReducesLeastSquares) {
  EXPECT_LT(run("lans", 0.05, 300), 1e-4);
}
TEST(Convergence, LambReducesLeastSquares) {
  EXPECT_LT(run("lamb", 0.05, 300), 1e-4);
}
TEST(Convergence, NvLambReducesLeastSquares) {
  EXPECT_LT(run("lamb", 0.05, 300, true), 1e-4);
}
TEST(Convergence, AdamWReducesLeastSquares) {
  EXPECT_LT(run("adamw", 0.05, 300), 1e-4);
}

}  // namespace
}  // namespace lansbert
