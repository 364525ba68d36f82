// DeviceBackend over cuda_api.h: every member forwards to the CUDA backend's entry points;
// make_communicator builds the NCCL communicator (nccl_communicator.h) on the model's stream.
#include "cuda_device_backend.h"

#include <cuda_runtime.h>

#include "cuda_api.h"
#include "cuda_check.cuh"
#include "cuda_ops.cuh"
#include "nccl_communicator.h"

namespace lansbert::cuda {
namespace {

// The stream of ops made by make_ops, or null for any other Ops (e.g. a profiling wrapper).
cudaStream_t stream_of(Ops<float>& ops) {
  auto* c = dynamic_cast<CudaOps*>(&ops);
  return c ? c->stream() : nullptr;
}

class CudaDeviceBackend final : public DeviceBackend {
 public:
  std::string description() const override { return device_description(index_); }
  int visible_devices() const override { return device_count(); }
  Status use_device(int index) override {
    if (index < 0 || index >= device_count())
      return Status::invalid_argument("backend: cuda: device " + std::to_string(index) + " requested, " +
                                      std::to_string(device_count()) + " visible");
    CUDA_CHECK(cudaSetDevice(index));
    LB_RETURN_IF_ERROR(check_kernel_image(index));  // probes the device just bound
    index_ = index;
    return Status::ok();
  }
  int compute_capability() const override { return cuda::compute_capability(index_); }
  Allocator& allocator() override { return device_allocator(); }
  bool memory_info(size_t* free_bytes, size_t* total_bytes) override {
    return cuda::memory_info(free_bytes, total_bytes);
  }
  std::unique_ptr<Ops<float>> make_ops(const DeviceOptions& options) override {
    OpsOptions o;
    o.math = options.math;
    o.attention = options.attention;
    o.cast_in_gemm = options.cast_in_gemm;
    return cuda::make_ops(o);
  }
  void synchronize_compute(Ops<float>& ops) override {
    cudaStream_t s = stream_of(ops);
    if (s)
      CUDA_CHECK(cudaStreamSynchronize(s));
    else
      cuda::synchronize();  // unknown ops: everything, to be safe
  }
  Status make_communicator(Communicator& host, Ops<float>& ops,
                           std::unique_ptr<Communicator>* out) override {
#if defined(LANSBERT_HAVE_NCCL)
    cudaStream_t s = stream_of(ops);
    if (!s)
      return Status::internal("backend: cuda: the model's ops are not the CUDA backend's; the NCCL stream cannot be ordered after them");
    *out = make_nccl_communicator(host);
    set_nccl_compute_stream(**out, s);
    return Status::ok();
#else
    (void)host;
    (void)ops;
    (void)out;
    return Status::unsupported("backend: cuda on more than one rank needs NCCL; this lansbert was built without it (nccl.h or libnccl not found at configure time)");
#endif
  }
  Status make_optimizer(const std::string& name, const OptimizerConfig& config,
                        std::unique_ptr<Optimizer>* out) override {
    return make_device_optimizer(name, config, out);
  }
  GradCheck unscale_and_check(const ParamTable& table, float* grads, double scale, size_t begin,
                              size_t end) override {
    return cuda::unscale_and_check(table, grads, scale, begin, end);
  }
  double gradient_sum_squares(const ParamTable& table, const float* grads) override {
    return cuda::gradient_sum_squares(table, grads);
  }

 private:
  int index_ = 0;
};

}  // namespace

Status make_device_backend(std::unique_ptr<DeviceBackend>* out) {
  if (device_count() == 0)
    return Status::unsupported("backend: cuda: " + no_device_reason());
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
