// What the CUDA backend knows about the devices it can see: count, names, compute
// capability, and whether this binary carries code that a device can run. A binary built
// without the device's architecture would otherwise fail at its first kernel launch with
// "no kernel image is available", far from the cause (the build's architecture list).
#include <string>

#include "cuda_api.h"

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

std::string no_device_reason() {
  int n = 0, driver = 0;
  const cudaError_t err = cudaGetDeviceCount(&n);
  // Without any driver the runtime says "insufficient driver" too: only a driver that is there
  // and older than the runtime is named as such.
  const bool have_driver = cudaDriverGetVersion(&driver) == cudaSuccess && driver > 0;
  (void)cudaGetLastError();
  if (err == cudaSuccess || err == cudaErrorNoDevice || !have_driver)
    return "no CUDA device visible (no driver, no GPU, or CUDA_VISIBLE_DEVICES empty)";
  std::string why = std::string("no CUDA device usable: ") + cudaGetErrorString(err) + " (" +
                    runtime_and_driver_versions() + ")";
  if (err == cudaErrorInsufficientDriver)
    why += ": the driver is older than the CUDA runtime this lansbert was built with; update the driver or "
           "build with the CUDA toolkit the driver supports (nvidia-smi names it)";
  return why;
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

std::string runtime_and_driver_versions() {
  auto text = [](int v) { return std::to_string(v / 1000) + "." + std::to_string(v % 1000 / 10); };
  int runtime = 0, driver = 0;
  (void)cudaRuntimeGetVersion(&runtime);
  const bool have_driver = cudaDriverGetVersion(&driver) == cudaSuccess && driver > 0;
  (void)cudaGetLastError();
  return "runtime " + text(runtime) + ", " + (have_driver ? "driver " + text(driver) : std::string("no driver"));
}

Status check_kernel_image(int index) {
  // Probing runs on the current device; switching is only for `lansbert info`'s loop over
  // devices (use_device binds first, so a rank never opens a context on another GPU).
  int current = -1;
  cudaError_t err = cudaGetDevice(&current);
  if (err == cudaSuccess && current != index) err = cudaSetDevice(index);
  if (err != cudaSuccess) {
    (void)cudaGetLastError();
    return Status::unsupported("backend: cuda: cannot use device " + std::to_string(index) + ": " +
                               cudaGetErrorString(err));
  }
  cudaFuncAttributes attr{};
  err = cudaFuncGetAttributes(&attr, kernel_image_probe);
  (void)cudaGetLastError();  // a missing image is reported here, not left sticky for the next call
  if (current >= 0 && current != index) (void)cudaSetDevice(current);
  if (err == cudaSuccess) return Status::ok();
  const std::string device = device_description(index);
  if (err != cudaErrorNoKernelImageForDevice && err != cudaErrorInvalidDeviceFunction)
    return Status::unsupported("backend: cuda: " + device + " cannot load this lansbert's device code: " +
                               cudaGetErrorString(err) + " (" + runtime_and_driver_versions() +
                               ": a driver older than the runtime cannot)");
  const int cc = compute_capability(index);
  std::string msg = "backend: cuda: this lansbert was built for CUDA architectures " + std::string(LANSBERT_CUDA_ARCHS) +
                    " and has no code that " + device + " can run (" + cudaGetErrorString(err) +
                    "): rebuild with -DLANSBERT_CUDA_ARCHITECTURES=" + std::to_string(cc);
  if (cc > 0 && cc < 75) msg += " using a CUDA 12.x toolkit (CUDA 13 dropped sm_" + std::to_string(cc) + ")";
  return Status::unsupported(msg);
}

}  // namespace lansbert::cuda
