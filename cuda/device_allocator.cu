// The device allocator: cudaMalloc (never managed memory, which can hang a GPU when
// oversubscribed), synchronous copies and memset for set-up paths; the step loop itself
// allocates nothing.
#include <string>

#include "cuda_api.h"
#include "cuda_check.cuh"
#include "lansbert/core/allocator.h"

namespace lansbert::cuda {

namespace {
class DeviceAllocator final : public Allocator {
 public:
  void* allocate(size_t bytes) override {
    void* p = nullptr;
    CUDA_CHECK(cudaMalloc(&p, bytes ? bytes : 256));
    return p;
  }
  void deallocate(void* p) override { CUDA_CHECK(cudaFree(p)); }
  void copy_from_host(void* dst, const void* src, size_t bytes) override {
    CUDA_CHECK(cudaMemcpy(dst, src, bytes, cudaMemcpyHostToDevice));
  }
  void copy_to_host(void* dst, const void* src, size_t bytes) override {
    CUDA_CHECK(cudaMemcpy(dst, src, bytes, cudaMemcpyDeviceToHost));
  }
  void copy_device(void* dst, const void* src, size_t bytes) override {
    CUDA_CHECK(cudaMemcpy(dst, src, bytes, cudaMemcpyDeviceToDevice));
  }
  void set_zero(void* p, size_t bytes) override { CUDA_CHECK(cudaMemset(p, 0, bytes)); }
};
}  // namespace

Allocator& device_allocator() {
  static DeviceAllocator a;
  return a;
}

void synchronize() {
  CUDA_CHECK(cudaDeviceSynchronize());
}

}  // namespace lansbert::cuda
