// DeviceBackend over cuda_api.h: every member forwards to the CUDA backend's entry points.
#include "cuda_device_backend.h"

#include <cuda_runtime.h>

#include "cuda_api.h"

namespace lansbert::cuda {
namespace {

class CudaDeviceBackend final : public DeviceBackend {
 public:
  std::string description() const override { return device_description(0); }
  Allocator& allocator() override { return device_allocator(); }
  std::unique_ptr<Ops<float>> make_ops(const DeviceOptions& options) override {
    OpsOptions o;
    o.math = options.math;
    o.attention = options.attention;
    return cuda::make_ops(o);
  }
  void synchronize() override { cuda::synchronize(); }
  Status make_optimizer(const std::string& name, const OptimizerConfig& config,
                        std::unique_ptr<Optimizer>* out) override {
    return make_device_optimizer(name, config, out);
  }
  GradCheck unscale_and_check(const ParamTable& table, float* grads, double scale) override {
    return cuda::unscale_and_check(table, grads, scale);
  }
};

}  // namespace

Status make_device_backend(std::unique_ptr<DeviceBackend>* out) {
  if (device_count() == 0)
    return Status::unsupported("backend: cuda: no CUDA device visible (no driver, no GPU, or CUDA_VISIBLE_DEVICES empty)");
  *out = std::make_unique<CudaDeviceBackend>();
  return Status::ok();
}

bool memory_info(size_t* free_bytes, size_t* total_bytes) {
  *free_bytes = *total_bytes = 0;
  if (cudaMemGetInfo(free_bytes, total_bytes) != cudaSuccess) {
    (void)cudaGetLastError();
    *free_bytes = *total_bytes = 0;
    return false;
  }
  return true;
}

bool try_allocate(size_t bytes) {
  void* p = nullptr;
  if (cudaMalloc(&p, bytes) != cudaSuccess) {
    (void)cudaGetLastError();  // cudaErrorMemoryAllocation is not sticky; clear it
    return false;
  }
  return cudaFree(p) == cudaSuccess;
}

}  // namespace lansbert::cuda
