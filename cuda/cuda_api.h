// The CUDA backend's entry points for host-only code (the CLI, the trainer). Plain C++:
// no CUDA header leaks out of cuda/.
#pragma once

#include <memory>
#include <string>

#include "lansbert/backend/ops.h"
#include "lansbert/core/allocator.h"
#include "lansbert/core/status.h"
#include "lansbert/optim/optimizer.h"

namespace lansbert::cuda {

// Number of visible CUDA devices; 0 without a driver or a device.
int device_count();
// "NVIDIA H200 (sm_90, 139 GiB)" for device `index`.
std::string device_description(int index);
// cudaMalloc-backed allocator for the current device.
Allocator& device_allocator();

// Waits for all work queued on the current device (for timing and before reading results
// outside the Allocator's synchronous copies).
void synchronize();

struct OpsOptions {
  // GEMMs in TF32 on tensor cores (10-bit mantissa inputs, fp32 accumulation). Off by default
  // so the fp32 backend matches the CPU twin to ~1e-6 relative.
  bool tf32 = false;
};

// The CUDA backend for fp32 models on the current device. Ops run in order on one stream;
// the allocator's copies synchronise with it.
std::unique_ptr<Ops<float>> make_ops(const OpsOptions& options = {});

// LANS, LAMB or AdamW (as lansbert::make_optimizer) whose update() works on FlatBuffers in
// device memory: same passes and per-element math as the CPU rules, deterministic per-block
// reductions, runs on the legacy default stream. UpdateStats are filled as on the CPU.
Status make_device_optimizer(const std::string& name, const OptimizerConfig& config,
                             std::unique_ptr<Optimizer>* out);

}  // namespace lansbert::cuda
