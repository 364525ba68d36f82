// The CPU backend: OpenMP loops over the shared math bodies, OpenBLAS for the GEMMs.
// Instantiated for float (training) and double (finite-difference gradient tests).
// Every reduction runs in a fixed order, so results do not depend on the thread count.
#pragma once

#include <memory>

#include "lansbert/backend/ops.h"

namespace lansbert::cpu {

// `math` kBf16/kFp16 (float only) emulates the GPU's mixed-precision GEMMs: both operands
// are rounded with the shared bodies of kernels/half.h, then multiplied in fp32. kTf32 is
// not offered (cuBLAS does not specify its TF32 rounding). Other modes are a fatal error.
// reuse_casts false ignores Ops::keep_gemm_operand (every GEMM rounds its operands): the
// baseline the reuse is tested and counted against. `attention` kNative or kFlash (the twin of
// the CUDA flash attention, src/cpu/cpu_flash_attention.cc); others are a fatal error.
template <typename T>
std::unique_ptr<Ops<T>> make_ops(GemmMath math = GemmMath::kFp32, bool reuse_casts = true,
                                 AttentionMode attention = AttentionMode::kNative);

}  // namespace lansbert::cpu
