// What the emulator's scheduler and its runtime (cudaMalloc, streams, errors) share.
#pragma once

#include <cuda_runtime.h>

#include <string>

namespace emu {

// A broken kernel or a misuse only a debugger would otherwise show: print and abort.
[[noreturn]] void fatal(const std::string& what);
// A launch the device would refuse: the error cudaGetLastError returns next, and a line saying why.
void launch_failed(const char* kernel, const std::string& why);
bool stream_is_valid(cudaStream_t s);
// A pointer given to the device (a kernel argument, a GEMM operand, a collective's buffer)
// must be null or point into a device allocation or a pinned host buffer; a pageable host
// pointer would fault on a GPU. Stops the run otherwise.
void check_device_pointer(const std::string& where, const void* p);

}  // namespace emu
