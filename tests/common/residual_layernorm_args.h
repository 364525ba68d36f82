// ResidualLayerNorm and ResidualLayerNormGrad arguments for tests, every field in one call.
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

template <typename T>
ResidualLayerNormGrad<T> residual_layernorm_grad_args(const T* dout, const T* sum, const T* gamma, const T* mean,
                                                      const T* rstd, T* dsum, T* dy, T* dgamma, T* dbeta, T* dbias,
                                                      int rows, int cols, float p = 0, RngKey key = {}) {
  ResidualLayerNormGrad<T> g;
  g.dout = dout;
  g.sum = sum;
  g.gamma = gamma;
  g.mean = mean;
  g.rstd = rstd;
  g.dsum = dsum;
  g.dy = dy;
  g.dgamma = dgamma;
  g.dbeta = dbeta;
  g.dbias = dbias;
  g.rows = rows;
  g.cols = cols;
  g.p = p;
  g.key = key;
  return g;
}

}  // namespace lansbert::testing
