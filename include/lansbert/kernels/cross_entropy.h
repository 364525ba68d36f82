// Softmax cross-entropy math for one row of logits with an integer label; label < 0 means
// "ignore" (an unused masked-LM slot) and contributes no loss and no gradient.
//   loss = logsumexp(x) - x[label],  dx_j = w * (softmax(x)_j - [j == label])
// The prediction for accuracy is the first index of the maximum logit.
#pragma once

#include <cstdint>

#include "lansbert/kernels/math.h"

namespace lansbert::kern {

// Loss of a row whose max and sum_exp = sum exp(x - max) are known; reads x[label] only
// when the label is not ignored. The CUDA kernel reduces max and sum_exp over a block, the CPU
// in lanes (src/cpu/cpu_cross_entropy.cc).
template <typename T>
LB_HOST_DEVICE T cross_entropy_loss(const T* x, int32_t label, T max, T sum_exp) {
  return label >= 0 ? (lb_log(sum_exp) + max - x[label]) : T(0);
}

// Gradient of w * loss for element j given e = exp(x_j - max) and the row's sum of them:
// lets a launcher take each exp once and keep it.
template <typename T>
LB_HOST_DEVICE T cross_entropy_dx_from_exp(T e, int j, int32_t label, T sum_exp, T w) {
  if (label < 0) return T(0);
  return w * (e / sum_exp - (j == label ? T(1) : T(0)));
}

// Gradient of w * loss for element j of a row whose max and sum_exp are known.
template <typename T>
LB_HOST_DEVICE T cross_entropy_dx(T xj, int j, int32_t label, T max, T sum_exp, T w) {
  if (label < 0) return T(0);
  const T p = lb_exp(xj - max) / sum_exp;
  return w * (p - (j == label ? T(1) : T(0)));
}

}  // namespace lansbert::kern
