// Attention softmax math with the key padding mask:
//   p_j = exp(scale * x_j - max) / sum_k exp(scale * x_k - max) over unmasked keys j,
//   p_j = 0 for masked keys. A row whose keys are all masked gives all zeros (finite),
//   where an additive -inf mask would give NaN.
//   backward dx_j = scale * p_j * (dp_j - sum_k dp_k p_k).
// Hugging Face adds a large negative number instead; for any row with one unmasked key the
// two agree to fp32 rounding, since exp(-1e4) underflows to 0.
#pragma once

#include <cstdint>

#include "lansbert/kernels/math.h"

namespace lansbert::kern {

// Element pieces, shared by the row functions below (CPU) and the CUDA kernels, which reduce
// a row's max, sum and dot product across a warp and then call these per element.
// Unnormalised probability of key j once the row's max over unmasked keys is known.
template <typename T>
LB_HOST_DEVICE T masked_softmax_exp(T x, int32_t keep, T scale, T mx) {
  return keep ? lb_exp(scale * x - mx) : T(0);
}
// 1/sum, or 0 for a row with no unmasked key (all-zero probabilities).
template <typename T>
LB_HOST_DEVICE T masked_softmax_inv_sum(T sum, bool any) {
  return any ? T(1) / sum : T(0);
}
// dx_j from p_j, dp_j and the row's dot = sum_k dp_k p_k.
template <typename T>
LB_HOST_DEVICE T masked_softmax_dx(T dp, T p, T dot, T scale) {
  return scale * p * (dp - dot);
}

template <typename T>
LB_HOST_DEVICE void masked_softmax_row(const T* x, const int32_t* key_mask, int n, T scale, T* p) {
  T mx = T(0);
  bool any = false;
  for (int j = 0; j < n; ++j)
    if (key_mask[j] && (!any || scale * x[j] > mx)) {
      mx = scale * x[j];
      any = true;
    }
  T sum = 0;
  for (int j = 0; j < n; ++j) {
    const T e = masked_softmax_exp(x[j], key_mask[j], scale, mx);
    p[j] = e;
    sum += e;
  }
  const T inv = masked_softmax_inv_sum(sum, any);
  for (int j = 0; j < n; ++j) p[j] *= inv;
}

template <typename T>
LB_HOST_DEVICE void masked_softmax_row_backward(const T* dp, const T* p, int n, T scale, T* dx) {
  T dot = 0;
  for (int j = 0; j < n; ++j) dot += dp[j] * p[j];
  for (int j = 0; j < n; ++j) dx[j] = masked_softmax_dx(dp[j], p[j], dot, scale);
}

}  // namespace lansbert::kern
