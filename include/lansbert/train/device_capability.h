// Which GEMM precisions a CUDA device can run as asked, from its compute capability, so a
// run on the wrong GPU stops at start-up with what to change instead of failing (or crawling)
// inside cuBLAS. Host-only: the trainer, `lansbert eval` and `lansbert bench` call it with
// DeviceBackend::compute_capability().
#pragma once

#include <string>

#include "lansbert/backend/ops.h"
#include "lansbert/core/status.h"
#include "lansbert/train/train_config.h"

namespace lansbert {

// `cc` is 10 * major + minor (70 V100, 80 A100, 90 H100/H200); 0 means unknown (no check).
// - bf16 below sm_80 fails (invalid_argument): no bf16 tensor cores, so cuBLAS either refuses
//   the GEMM or runs it on CUDA cores, many times slower; the message names `what` (the
//   setting, "precision.dtype"), `device`, and ends with `advice` (what to do instead).
// - tf32 below sm_80 runs, but cuBLAS computes those GEMMs in plain fp32 (there are no TF32
//   tensor cores): *note says so, for the log. Otherwise *note is cleared.
Status check_gemm_math_on_device(GemmMath math, int cc, const std::string& device, const std::string& what,
                                 const std::string& advice, std::string* note);

// The same for a training config, naming its setting (precision.dtype or precision.tf32) and
// fp16 as the way: the trainer's start-up check and `train --dry-run --gpu`.
Status check_config_precision_on_device(const TrainConfig& config, int cc, const std::string& device,
                                        std::string* note);

}  // namespace lansbert
