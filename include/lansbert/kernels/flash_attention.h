// Element math of the flash attention (`precision.attention: flash`): the attention of
// attention_native.h computed one key tile at a time with an online softmax, so the
// [B, A, S, S] scores and probabilities are never stored. Shared by the CPU twin
// (src/cpu/cpu_flash_attention.cc) and the CUDA kernels (cuda/flash_attention.cu).
//
// Forward, per query row, over key tiles: m is the running max of scale * s over the unmasked
// keys seen so far, l the running sum of exp(scale * s - m), acc the running sum of
// dropout(exp(scale * s - m)) v. When a tile raises the max to m', l and acc are rescaled by
// exp(m - m'). At the end ctx = acc / l and the row's log-sum-exp lse = m + log l is saved
// (+inf for a row with no unmasked key, whose probabilities are all zero, as in softmax.h).
// Which keys a query sees: softmax.h's attention_visible, as in the hand-written path.
//
// Backward, per element: p = exp(scale * s - lse) recomputed from the saved lse; with
// dropout mask z (the same Philox draw as the hand-written path: element ((b A + a) S + q) S + k
// of the [B, A, S, S] probabilities) pd = z p / (1 - r) is what multiplied v;
// dp = z (d_ctx . v) / (1 - r); ds = scale p (dp - D) with D = d_ctx . ctx over the head's
// columns (equal to sum_k dp_k p_k, the hand-written softmax backward's dot, because
// ctx = pd v); then d_q = ds k, d_k = ds^T q, d_v = pd^T d_ctx.
#pragma once

#include <cstdint>

#include "lansbert/kernels/dropout.h"
#include "lansbert/kernels/math.h"
#include "lansbert/kernels/softmax.h"

namespace lansbert::kern {

// The tile sizes both implementations walk (so the online softmax rescales at the same
// keys and 16-bit roundings of the unnormalised probabilities match as closely as they can):
// 64 query rows per CUDA block (16 per warp), 32 keys per tile; the backward's dK/dV kernel
// takes 64 keys per block and 32 queries per tile.
constexpr int kFlashHeadDim = 64;  // the only head size the CUDA kernels are built for (BERT's)
constexpr int kFlashRowTile = 64;
constexpr int kFlashKeyTile = 32;

template <typename T>
LB_HOST_DEVICE T flash_infinity() {
  return T(INFINITY);
}

// The element index of (query q, key k) of head `bh` (= b A + a) in the [B, A, S, S]
// probabilities: the dropout stream's counter, as the hand-written softmax_dropout uses it.
LB_HOST_DEVICE uint64_t flash_prob_index(int64_t bh, int seq, int q, int k) {
  return (uint64_t(bh) * uint64_t(seq) + uint64_t(q)) * uint64_t(seq) + uint64_t(k);
}

// The running max after a tile whose largest scaled unmasked score is tile_max (-inf if none).
template <typename T>
LB_HOST_DEVICE T flash_new_max(T m, T tile_max) {
  return tile_max > m ? tile_max : m;
}
// The factor l and acc are rescaled by when the max goes from m to m_new: 0 while no key was
// unmasked (l and acc are 0; exp(-inf - -inf) would be NaN).
template <typename T>
LB_HOST_DEVICE T flash_rescale(T m, T m_new) {
  return m == -flash_infinity<T>() ? T(0) : lb_exp(m - m_new);
}
// The unnormalised probability of a key with score s under the running max m.
template <typename T>
LB_HOST_DEVICE T flash_exp(T s, bool unmasked, T scale, T m) {
  return unmasked ? lb_exp(scale * s - m) : T(0);
}
// The row's saved statistic: log-sum-exp of the scaled unmasked scores, +inf without any.
template <typename T>
LB_HOST_DEVICE T flash_lse(T m, T l) {
  return l > T(0) ? m + lb_log(l) : flash_infinity<T>();
}
// 1/l for ctx = acc / l, 0 for a row with no unmasked key.
template <typename T>
LB_HOST_DEVICE T flash_inv_sum(T l) {
  return l > T(0) ? T(1) / l : T(0);
}
// Backward: the probability of a key from the row's lse (0 where masked or lse is +inf).
template <typename T>
LB_HOST_DEVICE T flash_prob(T s, bool unmasked, T scale, T lse) {
  return unmasked ? lb_exp(scale * s - lse) : T(0);
}
// Backward: ds from p, the dropout bits of the element, d(pd) = d_ctx . v and the row's D.
template <typename T>
LB_HOST_DEVICE T flash_dscore(T p, T dpd, uint32_t bits, float dropout, T row_d, T scale) {
  const T dp = dropout > 0 ? dropout_scale(dpd, bits, dropout) : dpd;
  return scale * p * (dp - row_d);
}
// The dropped-out probability (what multiplies v), or p without dropout.
template <typename T>
LB_HOST_DEVICE T flash_dropped(T p, uint32_t bits, float dropout) {
  return dropout > 0 ? dropout_scale(p, bits, dropout) : p;
}

}  // namespace lansbert::kern
