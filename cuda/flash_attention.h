// The flash attention on the GPU (`precision.attention: flash`): the attention of
// attention_native.h without its [B, A, S, S] tensors, on tensor cores through WMMA. The math
// per element is kernels/flash_attention.h, shared with the CPU twin
// (src/cpu/cpu_flash_attention.cc). Reads q, k, v, ctx and d(ctx) in fp32 (rows of the
// model's activations, any row stride) and rounds them to the GEMMs' 16-bit format as it
// stages them; writes ctx and d_q, d_k, d_v in fp32 (or, with FlashHalfIO, into kept copies); saves one log-sum-exp per (sequence,
// head, query) in the caller's stats slot. The dropout mask is the hand-written path's,
// drawn inside the kernels and never stored. Deterministic: no atomics (d_q has a kernel of
// its own rather than being accumulated across key tiles).
#pragma once

#include <cuda_runtime.h>

#include <string>

#include "lansbert/backend/attention.h"
#include "lansbert/backend/ops.h"

namespace lansbert::cuda {

// Why the flash kernels cannot run a call with this shape under this GEMM mode on a device of
// compute capability cc (major * 10 + minor): "" when they can. They need 16-bit GEMMs
// (bf16 from sm_80, fp16 from sm_70) and head_dim kern::kFlashHeadDim.
std::string flash_attention_check(const AttentionShape& s, GemmMath math, int cc);

// Where the kernels read and write 16-bit copies instead of the fp32 tensors: the kept GEMM
// operand copies of q, k, v (the projection GEMM's output), ctx (written as the output
// projection's operand) and d(ctx) (the GEMM that made it wrote it so). All null: fp32 in and
// out. Forward: q, k, v and optionally ctx_out; backward: q, k, v, d_ctx and ctx_in together,
// and optionally d_q, d_k, d_v (AttentionBackward::d_qkv_kept: written as the projection
// backward's operands, rounded once from the fp32 accumulators).
// Each pointer is where the corresponding fp32 pointer's element would be, same strides.
struct FlashHalfIO {
  const uint16_t *q = nullptr, *k = nullptr, *v = nullptr, *d_ctx = nullptr, *ctx_in = nullptr;
  uint16_t* ctx_out = nullptr;
  uint16_t *d_q = nullptr, *d_k = nullptr, *d_v = nullptr;
};

// REQUIRES: flash_attention_check(...) == "".
void flash_attention_forward(const AttentionForward<float>& a, kern::HalfFormat format, const FlashHalfIO& io,
                             cudaStream_t stream);
// row_d: scratch of batch * heads * seq floats (D = d(ctx) . ctx per row). bias_part: null,
// or (with a.d_qkv_bias, d(q, k, v) written as copies: io.d_q) scratch of
// flash_bias_partials(a.shape) floats for the bias sums' per-tile partials.
void flash_attention_backward(const AttentionBackward<float>& a, kern::HalfFormat format, const FlashHalfIO& io,
                              float* row_d, float* bias_part, cudaStream_t stream);
size_t flash_bias_partials(const AttentionShape& s);

}  // namespace lansbert::cuda
