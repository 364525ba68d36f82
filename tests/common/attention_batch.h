// The two-level GEMM batch of attention scores, Q K^T per (sequence, head), with heads read
// in place from [B, S, H] tensors (H = A * D) into [B, A, S, S] scores: what the encoder
// layer passes to Ops::gemm_batched, for the GEMM tests of every backend.
#pragma once

#include "lansbert/backend/ops.h"

namespace lansbert::testing {

inline GemmBatch attention_scores_batch(int B, int A, int S, int D) {
  GemmBatch g;
  g.outer = B;
  g.inner = A;
  g.a_outer = g.b_outer = int64_t(S) * A * D;
  g.a_inner = g.b_inner = D;
  g.c_outer = int64_t(A) * S * S;
  g.c_inner = int64_t(S) * S;
  return g;
}

}  // namespace lansbert::testing
