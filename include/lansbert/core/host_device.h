// LB_HOST_DEVICE marks the math bodies that the CPU backend and the CUDA kernels share.
// Compiled by nvcc it expands to __host__ __device__; by a host compiler, to nothing, so
// every kernel's arithmetic is one inline function exercised by the CPU tests.
#pragma once

#if defined(__CUDACC__)
#define LB_HOST_DEVICE __host__ __device__ __forceinline__
#else
#define LB_HOST_DEVICE inline
#endif
