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

// What a run of mask values (a tile of keys or of queries) holds, to decide before computing
// it whether any query of one tile sees any key of another: the smallest and largest non-zero
// value (lo > hi when there is none) and whether a 0 (padding) is among them. The flash kernels
// skip a tile no query of theirs sees: its probabilities are all zero, so it adds nothing.
struct MaskSpan {
  int32_t lo = INT32_MAX, hi = INT32_MIN;
  bool has_zero = false;
};
// One more mask value, and two spans as one (the CUDA kernels combine their lanes' spans).
LB_HOST_DEVICE void span_add(MaskSpan& s, int32_t v) {
  if (v == 0) {
    s.has_zero = true;
  } else {
    s.lo = v < s.lo ? v : s.lo;
    s.hi = v > s.hi ? v : s.hi;
  }
}
LB_HOST_DEVICE MaskSpan span_merge(MaskSpan a, const MaskSpan& b) {
  a.lo = b.lo < a.lo ? b.lo : a.lo;
  a.hi = b.hi > a.hi ? b.hi : a.hi;
  a.has_zero = a.has_zero || b.has_zero;
  return a;
}
LB_HOST_DEVICE MaskSpan mask_span(const int32_t* mask, int n) {
  MaskSpan s;
  for (int i = 0; i < n; ++i) span_add(s, mask[i]);
  return s;
}
// False only if no key of `keys` is attention_visible to any query of `queries`: a key must be
// non-zero, and then a padding query sees it, or a query of the same value may (their ranges
// overlap). Exact for packed rows, whose sequences lie in order, so that a run of positions
// holds every value between its lo and hi; for any other mask it may say true in vain, never
// false in vain.
LB_HOST_DEVICE bool span_may_see(const MaskSpan& keys, const MaskSpan& queries) {
  if (keys.lo > keys.hi) return false;
  return queries.has_zero || (keys.lo <= queries.hi && queries.lo <= keys.hi);
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
