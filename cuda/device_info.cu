// What the CUDA backend knows about the devices it can see: count, names, compute
// capability, and whether this binary carries code that a device can run. A binary built
// without the device's architecture would otherwise fail at its first kernel launch with
// "no kernel image is available", far from the cause (the build's architecture list).
#include <string>

#include "cuda_api.h"
#include "cuda_check.cuh"

#ifndef LANSBERT_CUDA_ARCHS
#define LANSBERT_CUDA_ARCHS "unknown"
#endif

namespace lansbert::cuda {

namespace {
// Launched never: cudaFuncGetAttributes on it says whether the binary has a cubin or PTX
// this device can load, the same lookup every kernel launch does.
__global__ void kernel_image_probe() {}
}  // namespace

// Returns the number of visible CUDA devices, 0 when there is no driver or no device.
int device_count() {
  int n = 0;
  if (cudaGetDeviceCount(&n) != cudaSuccess) return 0;
  return n;
}

std::string device_description(int index) {
  cudaDeviceProp p{};
  if (cudaGetDeviceProperties(&p, index) != cudaSuccess) return "unavailable";
  return std::string(p.name) + " (sm_" + std::to_string(p.major) + std::to_string(p.minor) + ", " +
         std::to_string(p.totalGlobalMem >> 30) + " GiB)";
}

int compute_capability(int index) {
  int major = 0, minor = 0;
  if (cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, index) != cudaSuccess ||
      cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, index) != cudaSuccess) {
    (void)cudaGetLastError();
    return 0;
  }
  return 10 * major + minor;
}

const char* built_architectures() { return LANSBERT_CUDA_ARCHS; }

Status check_kernel_image(int index) {
  int current = 0;
  CUDA_CHECK(cudaGetDevice(&current));
  CUDA_CHECK(cudaSetDevice(index));
  cudaFuncAttributes attr{};
  const cudaError_t err = cudaFuncGetAttributes(&attr, kernel_image_probe);
  (void)cudaGetLastError();  // a missing image is reported here, not left sticky for the next call
  CUDA_CHECK(cudaSetDevice(current));
  if (err == cudaSuccess) return Status::ok();
  const int cc = compute_capability(index);
  std::string msg = "backend: cuda: this lansbert was built for CUDA architectures " + std::string(LANSBERT_CUDA_ARCHS) +
                    " and has no code that " + device_description(index) + " can run (" + cudaGetErrorString(err) +
                    "): rebuild with -DLANSBERT_CUDA_ARCHITECTURES=" + std::to_string(cc);
  if (cc > 0 && cc < 75) msg += " using a CUDA 12.x toolkit (CUDA 13 dropped sm_" + std::to_string(cc) + ")";
  return Status::unsupported(msg);
}

}  // namespace lansbert::cuda
