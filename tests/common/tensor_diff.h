// Per-tensor comparison shared by the data-parallel checks (tests/dist/dist_model_test.cc and
// the compare_params tool): ||got - ref|| / ||ref|| of one tensor, with the parts of the
// global max |d| / max |ref| check, and which tensors are not compared.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <string>

namespace lansbert::testing {

struct TensorDiff {
  double rel = 0;           // ||got - ref|| / ||ref|| (||got - ref|| when ref is all zero)
  double max_abs_diff = 0;  // max |got - ref|
  double max_abs_ref = 0;   // max |ref|
  size_t identical = 0;     // elements with got == ref
};

inline TensorDiff tensor_diff(const float* got, const float* ref, size_t n) {
  TensorDiff t;
  double d2 = 0, r2 = 0;
  for (size_t i = 0; i < n; ++i) {
    const double d = std::fabs(double(got[i]) - ref[i]);
    d2 += d * d;
    r2 += double(ref[i]) * ref[i];
    t.max_abs_diff = std::max(t.max_abs_diff, d);
    t.max_abs_ref = std::max(t.max_abs_ref, double(std::fabs(ref[i])));
    t.identical += got[i] == ref[i];
  }
  t.rel = r2 > 0 ? std::sqrt(d2 / r2) : std::sqrt(d2);
  return t;
}

// The attention key biases. Their true gradient is exactly zero (softmax is invariant to a
// per-row shift of the scores), so their fp32 gradient is pure rounding noise, which LANS
// normalises into lr-sized updates: any change of summation order (one rank accumulating four
// micro-batches against two ranks accumulating two and averaging) gives other noise and other
// values. They have no effect on the model's outputs, so excluding exactly them loses nothing.
inline bool has_zero_true_gradient(const std::string& tensor_name) {
  return tensor_name.ends_with("attention.self.key.bias");
}

}  // namespace lansbert::testing
