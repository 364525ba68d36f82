// `lansbert bench`: what a micro-batch of a preset needs in memory, --batch 0's probe for the
// largest one that fits a device, and the refusal of a --batch that cannot fit before anything
// is allocated (an allocation failure deep inside the model is a fatal error, not a message).
#pragma once

#include <cstddef>
#include <string>

#include "lansbert/core/status.h"
#include "lansbert/model/bert_config.h"
#include "lansbert/model/bert_model.h"

namespace lansbert::cli {

// What a micro-batch's footprint depends on besides its size.
struct FootprintOptions {
  bool with_moments = false;    // an optimizer's m and v
  bool fused_attention = false; // cuDNN's or the flash attention: statistics kept, no probabilities
  bool cudnn_staging = false;   // cuDNN's bf16 staging
  bool flash_runs = false;      // the flash attention on every layer (Ops::attention_runs_flash)
  bool cast_operands = false;   // 16-bit GEMMs whose operands our kernels convert
  bool reuse = false;           // ... kept and reused (Ops::keep_gemm_operand)
  Recompute recompute = Recompute::kNone;  // ModelLimits::recompute
  bool half_activations = false;           // ModelLimits::half_activations
};

// Bytes a micro-batch of B sequences of S tokens with P masked slots needs: params, grads,
// m, v (fp32), the activation arena, the 16-bit copies, and a margin for workspaces and
// fragmentation. An estimate, on the high side.
size_t bench_bytes_for(const BertConfig& cfg, int B, int S, int P, const FootprintOptions& f);

// --batch 0 (cuda): the largest micro-batch (from 4096 down, powers of two and 1.5x between)
// whose estimate is below the free device memory and can actually be allocated in one piece.
// Never fatal: allocation failures are caught (cuda::try_allocate). 0 when none fits (or
// without CUDA); *free_gib and *need_gib say what was free and what the answer needs.
int probe_batch(const BertConfig& cfg, int S, int P, const FootprintOptions& f, double* free_gib, double* need_gib);

// An explicit --batch B whose estimate exceeds `have` bytes of `where` ("this host's memory",
// "the free memory of <device>") is invalid_argument naming --batch, both sizes and the largest
// micro-batch of the probe's list that would fit. have <= 0: not known, no check.
Status check_batch_fits(const BertConfig& cfg, int B, int S, int P, const FootprintOptions& f, double have,
                        const std::string& where);

}  // namespace lansbert::cli
