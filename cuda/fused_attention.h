// The fused attention of the CUDA backend: cuDNN's scaled-dot-product attention through the
// graph API (cudnn_sdpa_graphs.h), chosen at run time per call, with the hand-written
// attention (attention_native.h) as fallback and, in `auto` mode, as the reference it is
// checked against. Never fatal: whatever stops the fused path (no cuDNN, too old, no engine
// for the shape, a mask that is not a prefix) is logged once per reason and the caller runs
// the hand-written attention. Attention dropout runs fused with lansbert's own keep mask
// (the same elements dropped as by the hand-written path), staged as a bf16 [B, H, S, S]
// tensor that the forward and the backward each refill from the dropout key.
//
// Precision: our activations are fp32; cuDNN's SDPA takes bf16 (or fp16) Q, K, V, O, dO.
// The fused path rounds them to bf16 (kern::float_to_bf16, the same rounding the bf16
// weight copy uses), runs cuDNN with fp32 accumulation and fp32 softmax statistics, and
// widens O, dQ, dK, dV back to fp32. Expect ~1e-2 relative differences from the fp32 path.
#pragma once

#include <cuda_runtime.h>

#include <memory>
#include <string>

#include "lansbert/backend/attention.h"

namespace lansbert::cuda {

// Why the fused path cannot run this call, judged from its arguments alone (no device, no
// library): "" when nothing here stops it. Exposed for tests.
std::string fused_attention_argument_check(const AttentionShape& shape, float dropout, bool have_key_lengths);

// Bounds of the `auto` mode's first-use comparison: max |fused - native| / max |native|.
constexpr double kFusedForwardTolerance = 2e-2;
constexpr double kFusedBackwardTolerance = 5e-2;

class FusedAttention {
 public:
  FusedAttention(AttentionMode mode, cudaStream_t stream);
  ~FusedAttention();
  FusedAttention(const FusedAttention&) = delete;
  FusedAttention& operator=(const FusedAttention&) = delete;

  // "cuDNN 9.19.0 (libcudnn.so.9)", or why it is unavailable. Loads the library.
  std::string availability();

  // Runs the fused forward: ctx written, softmax statistics (fp32 [B, A, S]) saved in
  // a.stats, or at the start of a.probs without it. False (nothing written) when it does not
  // apply; the reason was logged.
  bool forward(const AttentionForward<float>& a);
  // The backward of a forward that returned true: d_q, d_k, d_v written. False when it could
  // not run (logged); the caller then recomputes the probabilities and runs the hand-written
  // backward.
  bool backward(const AttentionBackward<float>& a);

  // Whether `auto` still has to compare this shape's forward / backward (with or without
  // dropout: different graphs) with the native one, and the outcome of such a comparison
  // (false switches the fused path off for good).
  bool needs_forward_check(const AttentionShape& s, bool dropout) const;
  bool needs_backward_check(const AttentionShape& s, bool dropout) const;
  void record_check(const AttentionShape& s, bool dropout, bool backward, double rel_error);

  // Largest |a - b| and |b| over n device floats (for the checks and the tests).
  struct Diff {
    double max_abs = 0, max_ref = 0;
    double rel() const { return max_ref > 0 ? max_abs / max_ref : max_abs; }
  };
  Diff compare(const float* a, const float* b, size_t n);

  // The last reason the fused path was not used ("" if it was), for tests.
  const std::string& last_fallback() const { return last_fallback_; }

 private:
  struct Impl;
  void fall_back(const std::string& reason);

  AttentionMode mode_;
  cudaStream_t stream_;
  std::unique_ptr<Impl> impl_;
  std::string last_fallback_;
};

}  // namespace lansbert::cuda
