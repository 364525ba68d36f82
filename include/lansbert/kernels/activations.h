// Element math of the activations: GELU in its exact erf form (Hugging Face's "gelu") or its
// tanh approximation (Hugging Face's "gelu_new", the form Google's original BERT code
// computes and the one cuBLASLt's GELU epilogues fuse), and tanh (the pooler). Forward takes
// x; backward takes the upstream gradient and what the forward saw (x for GELU, the output y
// for tanh).
#pragma once

#include <cstdint>

#include "lansbert/kernels/fast_math.h"
#include "lansbert/kernels/math.h"

namespace lansbert::kern {

// Phi(x) and phi(x), the standard normal CDF and density: libm in double, the vectorisable
// float forms of fast_math.h in single precision (identical on CPU and GPU).
LB_HOST_DEVICE double normal_cdf(double x) { return 0.5 * (1.0 + lb_erf(x * 0.70710678118654752440)); }
LB_HOST_DEVICE float normal_cdf(float x) { return normal_cdf_f32(x); }
LB_HOST_DEVICE double normal_pdf(double x) { return 0.39894228040143267794 * lb_exp(-0.5 * x * x); }
LB_HOST_DEVICE float normal_pdf(float x) { return 0.39894228040143267794f * exp_f32(-0.5f * x * x); }

// gelu(x) = x * Phi(x) = 0.5 x (1 + erf(x / sqrt 2))
template <typename T>
LB_HOST_DEVICE T gelu(T x) {
  return x * normal_cdf(x);
}

// d gelu / dx = Phi(x) + x phi(x), phi the standard normal density.
template <typename T>
LB_HOST_DEVICE T gelu_grad(T dy, T x) {
  return dy * (normal_cdf(x) + x * normal_pdf(x));
}

// The tanh approximation (Hendrycks & Gimpel 2016, eq. in section 2):
//   gelu(x) ~ 0.5 x (1 + tanh(u)),  u = sqrt(2/pi) (x + 0.044715 x^3)
// In single precision 0.5 (1 + tanh(u)) is written as the logistic 1 / (1 + exp(-2u)), with
// exp_f32, so the CPU twin and the GPU evaluate one formula (as normal_cdf_f32 above) and it
// stays accurate in relative terms where it is tiny (x very negative). Within 4.8e-4 of the
// erf form everywhere (4.73e-4 at most, near x = -2.70): about bf16's rounding of an output
// near 0.1, but a different function for a trained model all the same.
// d/dx [x s(x)] = s + x s (1 - s) 2 u',  u' = sqrt(2/pi) (1 + 3 * 0.044715 x^2).
constexpr double kGeluTanhScale = 0.79788456080286535588;  // sqrt(2/pi)
constexpr double kGeluTanhCubic = 0.044715;
LB_HOST_DEVICE float gelu_tanh_sigmoid(float x) {
  const float u = float(kGeluTanhScale) * (x + float(kGeluTanhCubic) * x * x * x);
  return 1.0f / (1.0f + exp_f32(-2.0f * u));
}
LB_HOST_DEVICE double gelu_tanh_sigmoid(double x) {
  return 0.5 * (1.0 + lb_tanh(kGeluTanhScale * (x + kGeluTanhCubic * x * x * x)));
}
template <typename T>
LB_HOST_DEVICE T gelu_tanh(T x) {
  return x * gelu_tanh_sigmoid(x);
}
template <typename T>
LB_HOST_DEVICE T gelu_tanh_grad(T dy, T x) {
  const T s = gelu_tanh_sigmoid(x);
  const T du = T(kGeluTanhScale) * (T(1) + T(3 * kGeluTanhCubic) * x * x);
  return dy * (s + T(2) * x * s * (T(1) - s) * du);
}

// Which GELU a model computes (BertConfig::hidden_act): every GELU op takes it.
enum class GeluForm : uint8_t { kErf, kTanh };
template <typename T>
LB_HOST_DEVICE T gelu(T x, GeluForm f) {
  return f == GeluForm::kTanh ? gelu_tanh(x) : gelu(x);
}
template <typename T>
LB_HOST_DEVICE T gelu_grad(T dy, T x, GeluForm f) {
  return f == GeluForm::kTanh ? gelu_tanh_grad(dy, x) : gelu_grad(dy, x);
}
// The forms as types, for host loops that choose once, outside the loop, so the loop body
// has no branch and vectorises as before (the CPU twins): with_gelu_form(f, [&](auto g) {
// ... g.fwd(x) ... }).
struct GeluErf {
  template <typename T>
  static T fwd(T x) { return gelu(x); }
  template <typename T>
  static T grad(T dy, T x) { return gelu_grad(dy, x); }
};
struct GeluTanh {
  template <typename T>
  static T fwd(T x) { return gelu_tanh(x); }
  template <typename T>
  static T grad(T dy, T x) { return gelu_tanh_grad(dy, x); }
};
template <typename F>
void with_gelu_form(GeluForm f, F&& body) {
  if (f == GeluForm::kTanh)
    body(GeluTanh{});
  else
    body(GeluErf{});
}

template <typename T>
LB_HOST_DEVICE T tanh_fwd(T x) {
  return lb_tanh(x);
}

// d tanh / dx = 1 - y^2, written in terms of the saved output y.
template <typename T>
LB_HOST_DEVICE T tanh_grad(T dy, T y) {
  return dy * (T(1) - y * y);
}

}  // namespace lansbert::kern
