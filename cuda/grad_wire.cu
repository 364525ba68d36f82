// The 16-bit gradient wire's conversion kernels: the device twins of the host loops in the
// MPI communicator, from the same bodies (kernels/grad_wire.h, kernels/half.h).
#include "grad_wire.h"

#include "lansbert/kernels/grad_wire.h"
#include "launch.cuh"

namespace lansbert::cuda {

void grads_to_wire(const float* x, uint16_t* wire, size_t n, float scale, kern::HalfFormat f,
                   cudaStream_t stream) {
  launch_map(n, stream, [=] __device__(size_t i) { wire[i] = kern::grad_to_wire(x[i], scale, f); });
}

void grads_from_wire(const uint16_t* wire, float* x, size_t n, kern::HalfFormat f,
                     cudaStream_t stream) {
  launch_map(n, stream, [=] __device__(size_t i) { x[i] = kern::half_to_float(wire[i], f); });
}

}  // namespace lansbert::cuda
