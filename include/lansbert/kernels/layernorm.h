// LayerNorm math. A row's statistics are reduced by the launcher (a loop on the CPU, a warp
// on the GPU); the per-element pieces are shared:
//   forward  y = (x - mean) * rstd * gamma + beta,  rstd = 1/sqrt(var + eps)
//   backward dx = rstd * (g - mean(g) - xhat * mean(g * xhat)),  g = dy * gamma
// with dgamma += dy * xhat and dbeta += dy reduced over rows.
#pragma once

#include "lansbert/kernels/math.h"

namespace lansbert::kern {

template <typename T>
LB_HOST_DEVICE T layernorm_rstd(T var, T eps) {
  return T(1) / lb_sqrt(var + eps);
}

template <typename T>
LB_HOST_DEVICE T layernorm_out(T x, T mean, T rstd, T gamma, T beta) {
  return (x - mean) * rstd * gamma + beta;
}

template <typename T>
LB_HOST_DEVICE T layernorm_dx(T dy, T gamma, T xhat, T rstd, T mean_g, T mean_gx) {
  return rstd * (dy * gamma - mean_g - xhat * mean_gx);
}

}  // namespace lansbert::kern
