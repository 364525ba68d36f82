// ResidualLayerNorm arguments for tests, every field in one call.
#pragma once

#include "lansbert/backend/ops.h"

namespace lansbert::testing {

template <typename T>
ResidualLayerNorm<T> residual_layernorm_args(T* y, const T* bias, const T* residual, int rows, int cols, float p,
                                             RngKey key, const T* gamma, const T* beta, T* out, T* mean, T* rstd,
                                             bool keep_out = false, T eps = T(1e-12)) {
  ResidualLayerNorm<T> a;
  a.y = y;
  a.bias = bias;
  a.residual = residual;
  a.rows = rows;
  a.cols = cols;
  a.p = p;
  a.key = key;
  a.gamma = gamma;
  a.beta = beta;
  a.out = out;
  a.mean = mean;
  a.rstd = rstd;
  a.eps = eps;
  a.keep_out = keep_out;
  return a;
}

}  // namespace lansbert::testing
