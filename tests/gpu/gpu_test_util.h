// Shared by the gpu tests: skip without a device, copy vectors to and from the device, and
// compare a device result with its CPU twin, printing the max absolute and relative error
// (relative to the largest reference magnitude, so cancellation in one element does not
// dominate).
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <random>
#include <string>
#include <vector>

#include "cuda_api.h"
#include "lansbert/core/buffer.h"

#define LB_REQUIRE_GPU()                                                              \
  do {                                                                                \
    if (::lansbert::cuda::device_count() == 0)                                        \
      GTEST_SKIP() << "no CUDA device visible: GPU parity test compiled but not run"; \
  } while (0)

namespace lansbert::testing {

template <typename T>
Buffer<T> to_device(const std::vector<T>& h) {
  Buffer<T> d(h.size(), cuda::device_allocator());
  if (!h.empty()) cuda::device_allocator().copy_from_host(d.data(), h.data(), h.size() * sizeof(T));
  return d;
}

template <typename T>
std::vector<T> to_host(const T* d, size_t n) {
  std::vector<T> h(n);
  if (n) cuda::device_allocator().copy_to_host(h.data(), d, n * sizeof(T));
  return h;
}
template <typename T>
std::vector<T> to_host(const Buffer<T>& d) {
  return to_host(d.data(), d.size());
}

inline std::vector<float> random_vector(size_t n, uint32_t seed, float scale = 1.0f) {
  std::mt19937 g(seed);
  std::normal_distribution<float> d(0.0f, scale);
  std::vector<float> v(n);
  for (float& x : v) x = d(g);
  return v;
}

struct ErrorStats {
  double max_abs = 0, max_ref = 0;
  double rel() const { return max_ref > 0 ? max_abs / max_ref : max_abs; }
};

template <typename T>
ErrorStats compare(const std::vector<T>& got, const std::vector<T>& want) {
  ErrorStats e;
  for (size_t i = 0; i < want.size(); ++i) {
    e.max_abs = std::max(e.max_abs, std::fabs(double(got[i]) - double(want[i])));
    e.max_ref = std::max(e.max_ref, std::fabs(double(want[i])));
  }
  return e;
}

// EXPECTs got ~ want within rel_tol (relative to the largest |want|) and prints the errors.
template <typename T>
void expect_close(const std::string& what, const std::vector<T>& got, const std::vector<T>& want,
                  double rel_tol) {
  ASSERT_EQ(got.size(), want.size()) << what;
  const ErrorStats e = compare(got, want);
  std::printf("  %-40s max_abs %.3e  rel %.3e  (n=%zu)\n", what.c_str(), e.max_abs, e.rel(),
              want.size());
  EXPECT_LE(e.rel(), rel_tol) << what << ": max_abs " << e.max_abs << " max_ref " << e.max_ref;
  for (size_t i = 0; i < got.size(); ++i)
    if (!std::isfinite(double(got[i])) && std::isfinite(double(want[i]))) {
      ADD_FAILURE() << what << ": non-finite at " << i;
      break;
    }
}

}  // namespace lansbert::testing
