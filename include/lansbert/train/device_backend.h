// DeviceBackend: what the trainer needs from an accelerator backend, as a host-only
// interface, so the train layer never includes a CUDA (or NCCL) header or links the CUDA
// library. Under mpirun each rank binds one device (use_device, by local rank) and gets a
// communicator over device buffers (make_communicator: NCCL in the CUDA backend).
// The program (src/cli) registers the CUDA implementation (cuda/cuda_device_backend.h) by
// name when built with CUDA; run_training looks `backend:` up here. Without a registered
// implementation, make_device_backend fails with a message saying why.
#pragma once

#include <functional>
#include <memory>
#include <string>

#include "lansbert/backend/ops.h"
#include "lansbert/core/allocator.h"
#include "lansbert/core/status.h"
#include "lansbert/dist/communicator.h"
#include "lansbert/model/param_table.h"
#include "lansbert/optim/loss_scaler.h"
#include "lansbert/optim/optimizer.h"

namespace lansbert {

struct DeviceOptions {
  GemmMath math = GemmMath::kFp32;  // GEMM operand rounding (backend/ops.h): fp32, tf32, bf16, fp16
  AttentionMode attention = AttentionMode::kNative;  // precision.attention (backend/attention.h)
  bool cast_in_gemm = false;  // precision.gemm_cast: cublas (16-bit math only; train_config.h)
};

class DeviceBackend {
 public:
  virtual ~DeviceBackend() = default;
  // "NVIDIA H200 (sm_90, 139 GiB)": the device in use, for logs.
  virtual std::string description() const = 0;
  // The bound device's compute capability, 10 * major + minor (70 V100, 90 H100/H200), for
  // the start-up checks of device_capability.h; 0 where the backend cannot tell.
  virtual int compute_capability() const { return 0; }
  // Devices this process can see (CUDA_VISIBLE_DEVICES applied).
  virtual int visible_devices() const = 0;
  // Makes device `index` this process's device. Call before make_ops or any allocation.
  // REQUIRES: 0 <= index < visible_devices().
  virtual Status use_device(int index) = 0;
  // Device memory; copies to and from the host are synchronous.
  virtual Allocator& allocator() = 0;
  // Free and total bytes of the bound device's memory, for the trainer's check that a run
  // fits before it allocates; false where the backend cannot tell (the check is skipped).
  virtual bool memory_info(size_t* free_bytes, size_t* total_bytes) {
    *free_bytes = *total_bytes = 0;
    return false;
  }
  // Ops on this device (the model's forward/backward): fp32 tensors, GEMMs per options.math.
  virtual std::unique_ptr<Ops<float>> make_ops(const DeviceOptions& options) = 0;
  // Waits for the work queued on `ops` (the model's forward/backward), not for a
  // communicator's stream: the trainer charges that to compute, and waits for reductions in
  // the communicator (whose waits watch for NCCL errors and hangs).
  virtual void synchronize_compute(Ops<float>& ops) = 0;
  // Collectives over this device's buffers among the ranks of `host` (NCCL in the CUDA
  // backend, its unique id broadcast over `host`). Blocking collectives return when the
  // result is in place; all_reduce_async is ordered after the work queued so far on `ops`
  // (so GradSync's buckets overlap the rest of backward) and wait_all() orders later work on
  // `ops` after it. The scalar collectives of training (metrics, flags, norms) stay on
  // `host`. REQUIRES: ops from this backend's make_ops; use_device called; every rank of
  // `host` calls this. Fails (unsupported) when the build has no such communicator.
  virtual Status make_communicator(Communicator& host, Ops<float>& ops,
                                   std::unique_ptr<Communicator>* out) = 0;
  // The update rule `name` over FlatBuffers in device memory (same math as make_optimizer).
  virtual Status make_optimizer(const std::string& name, const OptimizerConfig& config,
                                std::unique_ptr<Optimizer>* out) = 0;
  // The device twin of LossScaler::unscale_and_check on device gradients, over the elements
  // [begin, end) only (a sharded update's slice; end is clamped to the table).
  virtual GradCheck unscale_and_check(const ParamTable& table, float* grads, double scale, size_t begin,
                                      size_t end) = 0;
  // The device twin of gradient_sum_squares (optim/noise_scale.h) on device gradients laid out
  // by `table`, after the model's queued work (logging.noise_scale). Synchronises.
  virtual double gradient_sum_squares(const ParamTable& table, const float* grads) = 0;
};

// Builds the backend, or fails (unsupported) e.g. when no device is visible.
using DeviceBackendFactory = std::function<Status(std::unique_ptr<DeviceBackend>* out)>;

// Registers (or replaces) the factory for `name` ("cuda"). Thread-compatible: call at start-up.
void register_device_backend(const std::string& name, DeviceBackendFactory factory);
// Removes `name` (tests that register a stand-in).
void unregister_device_backend(const std::string& name);
bool has_device_backend(const std::string& name);
// Fails (unsupported) when nothing is registered under `name`, or with the factory's error.
Status make_device_backend(const std::string& name, std::unique_ptr<DeviceBackend>* out);

}  // namespace lansbert
