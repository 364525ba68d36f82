// The CUDA implementation of the train layer's DeviceBackend (host-only; built into
// lansbert_cuda), and device-memory queries for `lansbert bench`. The program registers
// make_device_backend under "cuda" at start-up (src/cli/main.cc) so that `backend: cuda` in
// a training config finds it; the train layer only sees the interface.
#pragma once

#include <memory>

#include "lansbert/core/status.h"
#include "lansbert/train/device_backend.h"

namespace lansbert::cuda {

// Fails (unsupported) when no CUDA device is visible.
Status make_device_backend(std::unique_ptr<DeviceBackend>* out);

// cudaMemGetInfo on the current device; false (and zeros) when it fails.
bool memory_info(size_t* free_bytes, size_t* total_bytes);
// Whether `bytes` can be cudaMalloc'ed now: allocates and frees at once. A failure is
// cleared (cudaGetLastError) and reported as false, never fatal.
bool try_allocate(size_t bytes);

}  // namespace lansbert::cuda
