// The arguments of Ops<T>::attention_forward / attention_backward: BERT's multi-head
// self-attention (bidirectional, key padding mask, scale 1/sqrt(head_dim), dropout on the
// probabilities) over heads read in place from [B*S, ld] activations, as one entry point so
// that a backend can fuse it (the CUDA backend: cuDNN's scaled-dot-product attention).
// The default implementation (attention_native.h) is the composition the model spelled out
// before this entry point existed, op for op, so every backend that does not override it
// gives the same bits as before.
#pragma once

#include <cstdint>
#include <string>

#include "lansbert/core/philox.h"
#include "lansbert/kernels/flash_attention.h"

namespace lansbert {

// Which attention a backend runs (precision.attention in configs, bench --attention):
//   native  the hand-written composition (the default; the CPU runs it or flash);
//   cudnn   a fused kernel (CUDA: cuDNN's SDPA) wherever it applies, the hand-written one
//           elsewhere, each reason logged once;
//   auto    like cudnn, but each shape's first fused forward and backward are compared with
//           the hand-written results, and the fused path is switched off if they disagree;
//   flash   lansbert's own fused attention (kernels/flash_attention.h): an online softmax over
//           key tiles that never stores the [B, A, S, S] scores, with the hand-written path's
//           dropout masks drawn inside it. Both backends (the CPU runs the twin); on CUDA with
//           tensor cores, so only where GEMMs are 16-bit and head_dim is 64 (else the
//           hand-written attention runs, the reason logged once).
enum class AttentionMode { kNative, kCudnn, kAuto, kFlash };

inline const char* attention_mode_name(AttentionMode m) {
  switch (m) {
    case AttentionMode::kCudnn: return "cudnn";
    case AttentionMode::kAuto: return "auto";
    case AttentionMode::kFlash: return "flash";
    default: return "native";
  }
}
inline bool parse_attention_mode(const std::string& s, AttentionMode* out) {
  for (AttentionMode m : {AttentionMode::kNative, AttentionMode::kCudnn, AttentionMode::kAuto, AttentionMode::kFlash})
    if (s == attention_mode_name(m)) {
      *out = m;
      return true;
    }
  return false;
}

// What Ops::attention_runs_flash answers in AttentionMode::kFlash, for plans made before any
// ops exist: the CPU twin runs for every shape, the CUDA kernels with 16-bit GEMMs and heads of
// kern::kFlashHeadDim (and, in bf16, on sm_80 or newer, which the precision checks require
// before a run starts). CudaOps asks flash_attention_check, which gives the reason.
inline bool flash_attention_planned(bool cuda_backend, bool half_gemms, int head_dim) {
  return !cuda_backend || (half_gemms && head_dim == kern::kFlashHeadDim);
}

// Which implementation ran a forward. attention_backward must be told, because what the
// forward saved differs: the probabilities (kNative) or a fused kernel's own statistics
// (kFused: cuDNN's; kFlash: the flash attention's, one log-sum-exp per row in `stats`). The
// model keeps the value per layer between its forward and backward.
enum class AttentionImpl : int32_t { kNative = 0, kFused = 1, kFlash = 2 };

struct AttentionShape {
  int batch = 0, heads = 0, seq = 0, head_dim = 0;
  // Row stride of ctx and d_ctx (the hidden size): head a of token t starts at
  // t * ld + a * head_dim.
  int ld = 0;
  // Row stride of q, k, v and d_q, d_k, d_v; 0 means ld. The model's projection writes q, k
  // and v as the column blocks of one [B*S, 3H] tensor, so it passes 3H.
  int qkv_ld = 0;
  int qkv_stride() const { return qkv_ld > 0 ? qkv_ld : ld; }
};

template <typename T>
struct AttentionForward {
  AttentionShape shape;
  T scale = T(1);          // applied to q k^T before the softmax
  float dropout = 0;       // drop probability of the probabilities (0: no dropout)
  RngKey dropout_key{};    // Philox stream of that dropout
  // [B, S] (B rows), the batch's input_mask: 1 for a token, 0 for padding, or in packed rows
  // the number of the token's sequence; which keys a query sees: kern::attention_visible.
  const int32_t* key_mask = nullptr;
  // [B] real tokens per row, given when every row of key_mask is ones then zeros with at least
  // one one (BERT's padding, one sequence a row); nullptr otherwise. Fused kernels take
  // lengths, not masks.
  const int32_t* key_lengths = nullptr;
  const T* q = nullptr;    // [B*S, qkv_stride()]
  const T* k = nullptr;
  const T* v = nullptr;
  T* ctx = nullptr;        // [B*S, ld], written
  // Saved for the backward, [B, A, S, S] each. kNative keeps the probabilities in `probs`
  // (and the dropped ones in `probs_drop`, null when dropout == 0); a fused implementation
  // keeps its own smaller statistics instead, in `stats` (below) or at the start of `probs`.
  // Where Ops::attention_runs_flash the model passes no probability slots (null) and `stats`.
  T* probs = nullptr;
  T* probs_drop = nullptr;
  // [B, A, S] where a fused implementation saves its softmax statistics instead of at the
  // start of `probs`: the caller's per-layer memory when `probs` is shared between layers
  // (ModelLimits::attention_stats). Null: the start of `probs` (stats_slot()).
  T* stats = nullptr;
  T* stats_slot() const { return stats ? stats : probs; }
  T* scores = nullptr;     // scratch [B, A, S, S]; null where Ops::attention_runs_flash
  // Set only where Ops::attention_reads_only_gemm_operands(). qkv_kept: the caller produced
  // q, k, v kept as GEMM operands (Ops::gemm_bias_kept over the spans for_each_qkv_span
  // names), so their fp32 values may be unwritten; they are not kept again here, and the
  // backward drops them as it drops its own keeps. ctx_kept: ctx is produced the same way
  // (Ops::gemm_batched_kept) and stays kept until the caller drops it.
  bool qkv_kept = false;
  bool ctx_kept = false;
};

template <typename T>
struct AttentionBackward {
  AttentionShape shape;
  T scale = T(1);
  float dropout = 0;
  RngKey dropout_key{};
  AttentionImpl impl = AttentionImpl::kNative;  // what attention_forward returned
  const int32_t* key_mask = nullptr;
  const int32_t* key_lengths = nullptr;
  const T* q = nullptr;    // the forward's inputs and output
  const T* k = nullptr;
  const T* v = nullptr;
  const T* ctx = nullptr;
  const T* probs = nullptr;       // what the forward saved
  const T* probs_drop = nullptr;
  const T* stats = nullptr;       // as AttentionForward::stats
  const T* stats_slot() const { return stats ? stats : probs; }
  const T* d_ctx = nullptr;       // [B*S, ld]
  // d_ctx was produced kept (Ops::gemm_kept; its fp32 values may be unwritten): read through
  // GEMMs and dropped here instead of kept. Only where Ops::attention_reads_only_gemm_operands().
  bool d_ctx_kept = false;
  T* d_q = nullptr;               // [B*S, qkv_stride()] each, written (=)
  T* d_k = nullptr;
  T* d_v = nullptr;
  // d_q, d_k, d_v produced kept (over the spans for_each_qkv_span names), for the projection's
  // backward to read through GEMMs and Ops::bias_add_backward_of_kept: their fp32 values may
  // be unwritten where Ops::kept_outputs_unwritten(). Only where
  // Ops::attention_keeps_input_gradients(); the hand-written path writes fp32 and keeps it.
  bool d_qkv_kept = false;
  // [3 * ld], the q/k/v projection's bias gradient: where set (only with d_qkv_kept, d_q, d_k,
  // d_v the column blocks of one [B*S, 3 * ld] tensor, d_q first) the backward also adds the
  // column sums of d(q, k, v) as GEMMs read them (the values Ops::bias_add_backward_of_kept
  // sums) into it. The flash attention sums what it writes, as it writes it, saving the
  // separate pass's read of d(q, k, v); the hand-written one calls bias_add_backward_of_kept.
  T* d_qkv_bias = nullptr;
  // Scratch, [B, A, S, S] each; where Ops::attention_runs_flash, d_probs only [B, A, S] and
  // d_scores null.
  T* d_probs = nullptr;
  T* d_scores = nullptr;
};

}  // namespace lansbert
