// The CUDA backend's entry points for host-only code (the CLI, the trainer). Plain C++:
// no CUDA header leaks out of cuda/.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "lansbert/backend/ops.h"
#include "lansbert/core/allocator.h"
#include "lansbert/core/status.h"
#include "lansbert/optim/loss_scaler.h"
#include "lansbert/optim/optimizer.h"

namespace lansbert::cuda {

// Number of visible CUDA devices; 0 without a driver or a device.
int device_count();
// Why device_count() is 0, for the message that says so: "no CUDA device visible (...)"
// (no driver at all among the causes), or the runtime's own error with both versions when a
// driver is there and fails otherwise (one older than this build's runtime reports no device
// at all: cudaErrorInsufficientDriver).
std::string no_device_reason();
// "NVIDIA H200 (sm_90, 139 GiB)" for device `index`.
std::string device_description(int index);
// 10 * major + minor of device `index` (70 V100, 80 A100, 90 H100/H200); 0 when unknown.
int compute_capability(int index);
// The CUDA architectures this binary was built for, as configured ("80 90").
const char* built_architectures();
// "runtime 13.0, driver 12.8" (the driver's CUDA version; "no driver" without one): a driver
// older than the runtime cannot load this binary's code.
std::string runtime_and_driver_versions();
// Fails (unsupported) when this binary has no device code that device `index` can run,
// naming the built architectures, the device and the rebuild option (or the runtime's error
// when the cause is another, such as an old driver); ok otherwise. Probes the current device
// when it is `index` (bind first), else switches to `index` and back.
Status check_kernel_image(int index);
// cudaMalloc-backed allocator for the current device.
Allocator& device_allocator();

// Waits for all work queued on the current device (for timing and before reading results
// outside the Allocator's synchronous copies).
void synchronize();

struct OpsOptions {
  // What the GEMMs round their operands to (backend/ops.h). kFp32 by default, so the backend
  // matches the CPU twin to ~1e-6 relative; kTf32 runs fp32 GEMMs on tensor cores; kBf16 and
  // kFp16 cast both operands (shared half.h bodies) into a workspace and run cuBLAS with
  // 16-bit inputs, fp32 accumulation and fp32 output: the CPU emulates exactly this.
  GemmMath math = GemmMath::kFp32;
  // Which attention runs (attention.h): native (default) | cudnn | auto. cudnn/auto use
  // cuDNN's fused SDPA (bf16 inputs, fp32 statistics) where it applies and fall back to the
  // hand-written attention elsewhere, logging why once (cuda/fused_attention.h).
  AttentionMode attention = AttentionMode::kNative;
  // With kBf16/kFp16: hand the fp32 operands to cuBLAS with compute type 32F_FAST_16BF (or
  // 32F_FAST_16F), which converts them inside the GEMM, instead of casting them first. Saves
  // a pass over every operand and the 16-bit workspaces; the conversion is then cuBLAS's
  // (bf16/fp16 or, as cublas_api.h allows, TF32), not the shared half.h body (the CPU
  // emulation is exact only for the cast kernels).
  bool cast_in_gemm = false;
  // With our cast pass: honour Ops::keep_gemm_operand (cast a kept span once for all the GEMMs
  // that read it). Off: every GEMM casts its operands, the baseline to measure it against.
  bool reuse_casts = true;
};

// "cuDNN 9.19.0 (libcudnn.so.9)" or "unavailable: <why>" for the fused attention on the
// current device (loads cuDNN; creates a handle, so it needs a device).
std::string fused_attention_availability();
// The cuDNN library alone, without a device: "9.19.0 (libcudnn.so.9, opened at run time)",
// "not loadable: ..." or "not built ..." (lansbert info).
std::string cudnn_library_status();

// The CUDA backend for fp32 models on the current device. Ops run in order on one stream;
// the allocator's copies synchronise with it.
std::unique_ptr<Ops<float>> make_ops(const OpsOptions& options = {});

// LANS, LAMB or AdamW (as lansbert::make_optimizer) whose update() works on FlatBuffers in
// device memory: same passes and per-element math as the CPU rules, deterministic per-block
// reductions, runs on the legacy default stream. UpdateStats are filled as on the CPU.
// FlatBuffers::half_params (device memory) is written in the apply kernel's pass.
Status make_device_optimizer(const std::string& name, const OptimizerConfig& config,
                             std::unique_ptr<Optimizer>* out);

// --- Mixed-precision helpers (see docs/cuda.md) -----------------------------------------

// dst[i] = bf16(src[i]) (round to nearest even), device pointers, on the legacy stream.
void cast_to_bf16(const float* src, uint16_t* dst, size_t n);

// The device twin of LossScaler::unscale_and_check: multiplies every gradient by
// float(1/scale) (unless scale == 1) and counts non-finite values per table block; grads is
// device memory laid out by `table`. Synchronises (the counts come back to the host).
// Only elements [begin, end) are unscaled and counted (a sharded update's slice).
GradCheck unscale_and_check(const ParamTable& table, float* grads, double scale, size_t begin = 0,
                            size_t end = SIZE_MAX);

// The device twin of gradient_sum_squares (lansbert/optim/noise_scale.h): the sum of g² in
// double over device gradients laid out by `table`, one CUDA block per chunk (a fixed tree),
// the chunks' partials added on the host in order. Synchronises.
double gradient_sum_squares(const ParamTable& table, const float* grads);

}  // namespace lansbert::cuda
