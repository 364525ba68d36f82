// The device conversions of the 16-bit gradient wire (lansbert/kernels/grad_wire.h), on a
// given stream: the NCCL communicator runs them on its communication stream around the
// 16-bit collective, so the compute stream never waits for them.
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>

#include "lansbert/kernels/half.h"

namespace lansbert::cuda {

// wire[i] = grad_to_wire(x[i], scale, f) for i < n.
void grads_to_wire(const float* x, uint16_t* wire, size_t n, float scale, kern::HalfFormat f,
                   cudaStream_t stream);
// x[i] = the wire value widened to fp32, for i < n.
void grads_from_wire(const uint16_t* wire, float* x, size_t n, kern::HalfFormat f,
                     cudaStream_t stream);

}  // namespace lansbert::cuda
