// Gradients on a 16-bit wire (distributed.grad_reduce_dtype: bf16 | fp16): the shared math of
// the compressed all-reduce and reduce-scatter. Each rank rounds its gradient, scaled first by
// 1/world when the reduction is an average, to 16 bits; the ranks' 16-bit values are summed,
// every partial sum rounded back to 16 bits (what a reduction over a 16-bit buffer does in
// any library); the result is widened to fp32. Half the bytes of an fp32 all-reduce travel.
// Scaling before rounding keeps an fp16 sum of loss-scaled gradients in range: the average
// of values that fit fits too. NVIDIA's BERT pretraining reduces fp16 gradients with this
// pre-division (`allreduce_post_accumulation_fp16`), as does PyTorch's fp16_compress_hook.
// Bodies shared by the CUDA conversion kernels (cuda/grad_wire.cu), the MPI user reduction
// and the host conversions (src/dist/mpi_communicator.cc).
#pragma once

#include <cstdint>

#include "lansbert/kernels/half.h"

namespace lansbert::kern {

// What a rank puts on the wire for gradient g (scale: 1/world for an average, else 1).
LB_HOST_DEVICE uint16_t grad_to_wire(float g, float scale, HalfFormat f) {
  return float_to_half(g * scale, f);
}

// One step of the reduction: the sum of two wire values, rounded to the wire's format.
// Commutative (IEEE addition is), so any reduction tree is valid, but not associative: the
// result depends on the tree, which the library picks (the fixed reduction order sums in
// rank order in fp32 and rounds once instead).
LB_HOST_DEVICE uint16_t wire_add(uint16_t a, uint16_t b, HalfFormat f) {
  return float_to_half(half_to_float(a, f) + half_to_float(b, f), f);
}

}  // namespace lansbert::kern
