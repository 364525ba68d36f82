#include "lansbert/train/device_capability.h"

namespace lansbert {

namespace {
// Ampere: the first architecture with bf16 and TF32 tensor cores.
constexpr int kFirstBf16Tf32Sm = 80;
}  // namespace

Status check_gemm_math_on_device(GemmMath math, int cc, const std::string& device, const std::string& what,
                                 const std::string& advice, std::string* note) {
  note->clear();
  if (cc <= 0 || cc >= kFirstBf16Tf32Sm) return Status::ok();
  if (math == GemmMath::kBf16)
    return Status::invalid_argument(what + ": bf16 needs bf16 tensor cores (sm_80 or newer: A100, H100, H200); " +
                                    device + " has none: " + advice);
  if (math == GemmMath::kTf32)
    *note = what + ": tf32 on " + device + ": no TF32 tensor cores before sm_80, so cuBLAS runs these GEMMs in " +
            "plain fp32 (fp16 uses the tensor cores)";
  return Status::ok();
}

Status check_config_precision_on_device(const TrainConfig& config, int cc, const std::string& device,
                                        std::string* note) {
  const GemmMath math = config.gemm_math();
  return check_gemm_math_on_device(math, cc, device, math == GemmMath::kTf32 ? "precision.tf32" : "precision.dtype",
                                   "use precision.dtype: fp16 (precision.loss_scale: auto or dynamic)", note);
}

}  // namespace lansbert
