// Where a buffer lives. The CPU backend uses host memory; the CUDA backend device memory.
#pragma once

namespace lansbert {

enum class Device { kCpu, kCuda };

inline const char* device_name(Device d) { return d == Device::kCpu ? "cpu" : "cuda"; }

}  // namespace lansbert
