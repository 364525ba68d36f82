// cuDNN operation graphs of BERT's attention (bidirectional, key padding by sequence lengths,
// one scale, optionally dropout by a mask we supply), forward and backward, in the two
// spellings cuDNN 9 has engines for:
//
//  kUnified    one CUDNN_BACKEND_OPERATION_SDPA_FWD/BWD_DESCRIPTOR node (cuDNN >= 9.15 for
//              the forward with sequence lengths, >= 9.17 for the backward; at the time of
//              writing the backward node reportedly has engines on Blackwell only).
//  kComposite  the flash-attention pattern cuDNN's runtime-fusion engines match, spelled out
//              with MATMUL, POINTWISE, REDUCTION and RESHAPE operations (what cudnn_frontend
//              builds for Ampere and Hopper): forward
//                S = Q K^T * scale, masked to -inf where row >= len_q or col >= len_kv,
//                Stats = max + log(sum exp(S - max)), P = exp(S - max) / sum, O = P V;
//              backward (recomputing P from Stats)
//                P = exp(S - Stats), dV = P^T dO, sum_i = rowsum(dO * O),
//                dS = P * (dO V^T - sum) * scale, dK = dS^T Q, dQ = dS K (fp32 accumulator).
//              With dropout (composite only: the unified node takes cuDNN's own RNG, never a
//              mask), a bf16 keep mask M [B, H, S, S] of zeros and ones and r = 1/(1-p) enter
//              where cudnn_frontend puts a user-supplied mask: forward O = ((P r) M) V;
//              backward dV = ((P M) r)^T dO, sum scaled by (1-p), and
//                dS = (P * ((dO V^T) M - sum)) r * scale,
//              which is P * (r M dP - rowsum(dO O)) * scale, dropout's exact backward.
//              lansbert fills M from its own Philox stream, so the fused path drops the
//              same elements as the hand-written one and the CPU.
//
// Q, K, V, O, dO, dQ, dK, dV are bf16 [B, H, S, D] views of [B*S, ld] row-major buffers
// (head h of token t at t*ld + h*D; cuDNN reads heads in place, as the GEMM path does).
// Stats are fp32 [B, H, S, 1], dense. Graphs are built here without a handle, so their
// operations can be checked against the library on a machine without a GPU.
#pragma once

#if LANSBERT_HAVE_CUDNN

#include <cstdint>

#include "dnn_graph.h"

namespace lansbert::cuda::sdpa {

// Unique ids of the non-virtual tensors, as the variant pack names them.
enum Uid : int64_t {
  kQ = 1, kK, kV, kO, kStats, kScale, kSeqLenQ, kSeqLenKV,
  kDO, kDQ, kDK, kDV,
  kSoftmaxSum,  // backward workspace: fp32 [B, H, S, 1]
  kDQAccum,     // backward workspace: fp32 [B, H, S, D], zeroed before each run
  kDropScaleInv,  // by-value float: 1 - p (1 without dropout), the backward's row-sum factor
  kNegInf,      // by-value fill of masked scores
  kDropMask,    // with dropout: bf16 [B, H, S, S], dense, 1 = kept
  kDropScale,   // with dropout: by-value float 1 / (1 - p)
};

enum class GraphKind { kUnified, kComposite };
const char* name(GraphKind kind);

struct Dims {
  int64_t b = 0, h = 0, s = 0, d = 0, ld = 0;
};

// The lowest cuDNN run-time version with this spelling (0: not compiled in).
size_t min_version(GraphKind kind, bool backward);

// Add the operations of one direction to an empty builder; check g.ok() afterwards (it fails
// for the unified node with dropout).
void add_forward(dnn::GraphBuilder& g, GraphKind kind, const Dims& d, bool dropout = false);
void add_backward(dnn::GraphBuilder& g, GraphKind kind, const Dims& d, bool dropout = false);

// Bytes of the fp32 workspaces the backward graph names (kSoftmaxSum, kDQAccum).
int64_t softmax_sum_bytes(const Dims& d);
int64_t dq_accum_bytes(const Dims& d);

}  // namespace lansbert::cuda::sdpa

#endif  // LANSBERT_HAVE_CUDNN
