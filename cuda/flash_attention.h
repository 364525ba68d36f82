// The flash attention on the GPU (`precision.attention: flash`): the attention of
// attention_native.h without its [B, A, S, S] tensors, on tensor cores through WMMA. The math
// per element is kernels/flash_attention.h, shared with the CPU twin
// (src/cpu/cpu_flash_attention.cc). Reads q, k, v, ctx and d(ctx) in fp32 (rows of the
// model's activations, any row stride) and rounds them to the GEMMs' 16-bit format as it
// stages them; writes ctx and d_q, d_k, d_v in fp32; saves one log-sum-exp per (sequence,
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

// REQUIRES: flash_attention_check(...) == "".
void flash_attention_forward(const AttentionForward<float>& a, kern::HalfFormat format, cudaStream_t stream);
// row_d: scratch of batch * heads * seq floats (D = d(ctx) . ctx per row).
void flash_attention_backward(const AttentionBackward<float>& a, kern::HalfFormat format, float* row_d,
                              cudaStream_t stream);

}  // namespace lansbert::cuda
