// A DeviceBackend whose "device" is the host: CPU ops, the CPU optimizer, LossScaler's
// unscale-and-check, and an allocator that counts the copies across the (pretend) boundary.
// Registered under "cuda" in a test process, it drives the trainer's device path
// (src/train/device_run.cc, the device branches of trainer.cc: uploads of restored
// checkpoints, host staging of checkpoint writes, the Updater's device hooks) on machines
// without a GPU, where the real CUDA backend can never run.
#pragma once

#include <atomic>
#include <cstring>
#include <memory>

#include "lansbert/backend/cpu_ops.h"
#include "lansbert/optim/loss_scaler.h"
#include "lansbert/optim/noise_scale.h"
#include "lansbert/train/device_backend.h"

namespace lansbert::testing {

class CountingHostAllocator final : public Allocator {
 public:
  void* allocate(size_t bytes) override { return host_allocator().allocate(bytes); }
  void deallocate(void* p) override { host_allocator().deallocate(p); }
  void copy_from_host(void* dst, const void* src, size_t bytes) override {
    uploads += bytes;
    std::memmove(dst, src, bytes);
  }
  void copy_to_host(void* dst, const void* src, size_t bytes) override {
    downloads += bytes;
    std::memmove(dst, src, bytes);
  }
  void copy_device(void* dst, const void* src, size_t bytes) override { std::memmove(dst, src, bytes); }
  void set_zero(void* p, size_t bytes) override { std::memset(p, 0, bytes); }
  std::atomic<size_t> uploads{0}, downloads{0};  // bytes
};

class HostDeviceBackend final : public DeviceBackend {
 public:
  std::string description() const override { return name; }
  int visible_devices() const override { return 1; }
  int compute_capability() const override { return cc; }
  Status use_device(int index) override {
    bound = index;
    return Status::ok();
  }
  Allocator& allocator() override { return allocator_; }
  // Unknown (the trainer skips its check) unless a test sets free_bytes.
  bool memory_info(size_t* free_b, size_t* total_b) override {
    *free_b = free_bytes;
    *total_b = 2 * free_bytes;
    return free_bytes > 0;
  }
  std::unique_ptr<Ops<float>> make_ops(const DeviceOptions& options) override {
    last_math = options.math;
    if (options_seen) *options_seen = options;  // cast_in_gemm: the CPU has one rounding
    return cpu::make_ops<float>(options.math == GemmMath::kTf32 ? GemmMath::kFp32 : options.math);
  }
  void synchronize_compute(Ops<float>&) override { ++syncs; }
  // One rank only: tests/dist/train_device_dist_test.cc wraps this stand-in with a
  // communicator for several ranks.
  Status make_communicator(Communicator&, Ops<float>&, std::unique_ptr<Communicator>*) override {
    return Status::unsupported("the host stand-in has no device communicator");
  }
  Status make_optimizer(const std::string& name, const OptimizerConfig& config,
                        std::unique_ptr<Optimizer>* out) override {
    ++optimizers_made;
    return lansbert::make_optimizer(name, config, out);
  }
  GradCheck unscale_and_check(const ParamTable& table, float* grads, double scale, size_t begin,
                              size_t end) override {
    ++unscale_calls;
    LossScalerConfig c;
    c.mode = LossScaleMode::kStatic;
    c.initial_scale = scale;
    LossScaler s(c);
    return s.unscale_and_check(table, grads, begin, end);
  }
  double gradient_sum_squares(const ParamTable& table, const float* grads) override {
    return lansbert::gradient_sum_squares(table, grads);
  }

  CountingHostAllocator allocator_;
  GemmMath last_math = GemmMath::kFp32;
  // When set, make_ops copies its options there: a place that outlives this backend, which
  // run_eval destroys before it returns.
  DeviceOptions* options_seen = nullptr;
  size_t syncs = 0, optimizers_made = 0, unscale_calls = 0;
  int bound = -1;  // use_device's index
  size_t free_bytes = 0;  // what memory_info reports; 0: unknown
  std::string name = "host stand-in for a device";  // description(): a GPU's name looks up its peak
  int cc = 0;  // compute_capability(); 0: unknown (no precision check)
};

}  // namespace lansbert::testing
