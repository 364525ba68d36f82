// The CUDA backend's entry points for host-only code (the CLI, the trainer). Plain C++:
// no CUDA header leaks out of cuda/.
#pragma once

#include <string>

#include "lansbert/core/allocator.h"

namespace lansbert::cuda {

// Number of visible CUDA devices; 0 without a driver or a device.
int device_count();
// "NVIDIA H200 (sm_90, 139 GiB)" for device `index`.
std::string device_description(int index);
// cudaMalloc-backed allocator for the current device.
Allocator& device_allocator();

}  // namespace lansbert::cuda
