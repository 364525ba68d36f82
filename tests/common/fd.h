// Test helpers shared by the kernel and model suites: seeded random tensors and a central
// finite-difference gradient check in fp64.
#pragma once

#include <cmath>
#include <functional>
#include <random>
#include <vector>

namespace lansbert::testing {

// max(worst, d) for an error scan, keeping a NaN once seen: std::max(worst, NaN) returns worst,
// so a result of NaN would pass as no error (and EXPECT_LT(NaN, bound) fails, as it should).
inline double worse(double worst, double d) {
  if (std::isnan(worst)) return worst;
  return std::isnan(d) || d > worst ? d : worst;
}

inline std::vector<double> random_vec(size_t n, uint32_t seed, double lo = -1, double hi = 1) {
  std::mt19937 g(seed);
  std::uniform_real_distribution<double> d(lo, hi);
  std::vector<double> v(n);
  for (auto& x : v) x = d(g);
  return v;
}

template <typename T>
std::vector<T> cast(const std::vector<double>& v) {
  return std::vector<T>(v.begin(), v.end());
}

// Central difference of loss() with respect to x[i], restoring x[i] afterwards.
inline double central_difference(double* x, const std::function<double()>& loss, double h = 1e-6) {
  const double saved = *x;
  *x = saved + h;
  const double up = loss();
  *x = saved - h;
  const double down = loss();
  *x = saved;
  return (up - down) / (2 * h);
}

// Five-point central difference: error O(h^4), so a larger h keeps rounding noise small
// (used where the loss is a long computation, like the whole model).
inline double central_difference5(double* x, const std::function<double()>& loss, double h = 1e-3) {
  const double saved = *x;
  double f[4];
  const double offsets[4] = {2 * h, h, -h, -2 * h};
  for (int i = 0; i < 4; ++i) {
    *x = saved + offsets[i];
    f[i] = loss();
  }
  *x = saved;
  return (-f[0] + 8 * f[1] - 8 * f[2] + f[3]) / (12 * h);
}

// ||a - b|| / max(||b||, floor): the relative error over a set of gradient entries.
inline double relative_error(const std::vector<double>& a, const std::vector<double>& b,
                             double floor = 1e-12) {
  double diff = 0, ref = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    diff += (a[i] - b[i]) * (a[i] - b[i]);
    ref += b[i] * b[i];
  }
  return std::sqrt(diff) / std::max(std::sqrt(ref), floor);
}

// Checks every entry of x: analytic[i] against the central difference of loss().
// Returns the relative error over all entries.
inline double check_gradient(std::vector<double>& x, const std::vector<double>& analytic,
                             const std::function<double()>& loss, double h = 1e-6) {
  std::vector<double> numeric(x.size());
  for (size_t i = 0; i < x.size(); ++i) numeric[i] = central_difference(&x[i], loss, h);
  return relative_error(analytic, numeric);
}

}  // namespace lansbert::testing
