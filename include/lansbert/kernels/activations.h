// Element math of the activations: GELU in its exact erf form (Hugging Face's "gelu", as
// BERT was trained) and tanh (the pooler). Forward takes x; backward takes the upstream
// gradient and what the forward saw (x for GELU, the output y for tanh).
#pragma once

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
