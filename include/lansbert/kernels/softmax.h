// Attention softmax math with the key padding mask (attention_visible below):
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

// Whether a query sees a key, from the two tokens' input_mask values. BERT's mask is 1 for a
// token and 0 for padding, and every query sees every token (a padding query's outputs are
// never read). A packed row (data/packing.h) numbers its sequences 1, 2, ... in the mask, and a
// token sees only the tokens of its own sequence; a padding query (0) still sees every token,
// so one rule serves both and batches that are not packed give the same bits as before.
LB_HOST_DEVICE bool attention_visible(int32_t key, int32_t query) {
  return key != 0 && (query == 0 || key == query);
}

// Element pieces, shared by the CPU's row loops (src/cpu/cpu_softmax.cc) and the CUDA kernels:
// each reduces a row's max, sum and dot product in its own fixed order (CPU: lanes, CUDA: a
// warp) and then calls these per element.
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

}  // namespace lansbert::kern
