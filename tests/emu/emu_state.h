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

}  // namespace emu
