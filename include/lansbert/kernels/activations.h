// Element math of the activations: GELU in its exact erf form (Hugging Face's "gelu", as
// BERT was trained) and tanh (the pooler). Forward takes x; backward takes the upstream
// gradient and what the forward saw (x for GELU, the output y for tanh).
#pragma once

#include "lansbert/kernels/math.h"

namespace lansbert::kern {

// gelu(x) = x * Phi(x) = 0.5 x (1 + erf(x / sqrt 2))
template <typename T>
LB_HOST_DEVICE T gelu(T x) {
  return T(0.5) * x * (T(1) + lb_erf(x * T(0.70710678118654752440)));
}

// d gelu / dx = Phi(x) + x phi(x), phi the standard normal density.
template <typename T>
LB_HOST_DEVICE T gelu_grad(T dy, T x) {
  const T cdf = T(0.5) * (T(1) + lb_erf(x * T(0.70710678118654752440)));
  const T pdf = T(0.39894228040143267794) * lb_exp(T(-0.5) * x * x);
  return dy * (cdf + x * pdf);
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
