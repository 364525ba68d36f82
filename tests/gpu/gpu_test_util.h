// Shared by the gpu tests: skip without a device, copy vectors to and from the device, and
// compare a device result with its CPU twin, printing the max absolute and relative error
// (relative to the largest reference magnitude, so cancellation in one element does not
// dominate).
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "cuda_api.h"
#include "lansbert/core/buffer.h"
#include "lansbert/kernels/half.h"

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

// The key projection's bias adds the same q.b to every score of a query's row, which the
// softmax ignores: its gradient is zero in exact arithmetic, and what a backend computes is
// rounding noise (about 1e-11 against gradients near 1e-2) that two summation orders do not
// share. LAMB and LANS normalise that noise into learning-rate-sized steps of the bias and its
// moments. Relative comparisons skip these tensors; gradient tests check instead that the
// noise is small against the model's largest gradient (found by the CUDA emulator, whose
// first run of the parity tests failed on exactly these tensors and no others).
inline bool zero_in_exact_arithmetic(const std::string& tensor) {
  return tensor.ends_with("attention.self.key.bias");
}

// Whether the device is lansbert's CUDA emulator (tests/emu), whose libraries' behaviour is
// known, rather than a GPU, whose cuBLASLt may decline what the emulator computes.
inline bool on_emulator() { return cuda::device_description(0).find("emulator") != std::string::npos; }

// 16-bit values (a GEMM's 16-bit output, read back) widened to fp32.
inline std::vector<float> widen(const std::vector<uint16_t>& h, kern::HalfFormat f) {
  std::vector<float> x(h.size());
  for (size_t i = 0; i < h.size(); ++i) x[i] = kern::half_to_float(h[i], f);
  return x;
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

// A non-finite result where the reference differs (NaN for a number, an infinity for a
// finite value or the other infinity) is an infinite error: fabs(NaN - x) is NaN, which
// std::max drops, so a kernel writing NaN everywhere would otherwise pass with max_abs 0.
// Equal non-finite values (the same infinity, NaN for NaN) match exactly. max_ref is taken
// over finite references only: one infinity in the reference would make every rel() 0.
// A size mismatch is an infinite error too.
template <typename T>
ErrorStats compare(const std::vector<T>& got, const std::vector<T>& want) {
  constexpr double kInf = std::numeric_limits<double>::infinity();
  ErrorStats e;
  if (got.size() != want.size()) e.max_abs = kInf;
  for (size_t i = 0; i < std::min(got.size(), want.size()); ++i) {
    const double g = double(got[i]), w = double(want[i]);
    double d = (g == w || (std::isnan(g) && std::isnan(w))) ? 0.0 : std::fabs(g - w);
    if (std::isnan(d)) d = kInf;
    e.max_abs = std::max(e.max_abs, d);
    if (std::isfinite(w)) e.max_ref = std::max(e.max_ref, std::fabs(w));
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

namespace lansbert {
// The four helpers nearly every parity test calls, by their short names.
using testing::expect_close;
using testing::random_vector;
using testing::to_device;
using testing::to_host;
}  // namespace lansbert
