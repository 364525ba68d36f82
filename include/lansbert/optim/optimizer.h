// The update rules: LANS (the default), LAMB (NVIDIA apex FusedLAMB, with the NVLAMB switch)
// and AdamW, selected by name. Each works on the flat fp32 buffers described by a
// ParamTable (params, grads, m, v share one layout) in one multi-tensor pass over the blocks:
// per-block norms in double from the values before modification, per-element math from
// lansbert/kernels/optim_math.h, and reductions summed in a fixed chunk order so the result
// does not depend on the thread count. docs/optimizers.md documents every switch.
//
// An Optimizer knows nothing of loss scales, skipped steps or schedules: the Updater
// (updater.h) unscales and checks the gradients, picks the learning rate and counts t.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "lansbert/core/status.h"
#include "lansbert/model/param_table.h"

namespace lansbert {

struct OptimizerConfig {
  std::string name = "lans";  // "lans" | "lamb" | "adamw"
  double beta1 = 0.9;
  double beta2 = 0.999;
  double eps = 1e-6;
  double weight_decay = 0.01;
  // Blocks with these roles get wd = 0. LANS still gives them trust ratios; LAMB only when
  // trust_ratio_on_excluded is set. Default: BERT's bias + LayerNorm exclusion.
  std::vector<ParamRole> no_decay_roles = {ParamRole::kBias, ParamRole::kLayerNormGamma,
                                           ParamRole::kLayerNormBeta};
  // LAMB and AdamW: if the global gradient norm G exceeds this, every gradient is divided by
  // G / max_grad_norm (apex FusedLAMB). <= 0 disables clipping. LANS ignores it: it
  // normalises each block's gradient instead.
  double max_grad_norm = 1.0;
  // LAMB only. false: apex FusedLAMB, the trust ratio only on blocks with wd != 0.
  // true: NVLAMB, the trust ratio on every block.
  bool trust_ratio_on_excluded = false;

  // Names the offending field.
  Status validate() const;
  // The weight decay this block gets.
  double decay_for(ParamRole role) const;
};

// Views of the four flat buffers; each holds table.total_elements() floats. The gaps between
// blocks are zero and never written.
struct FlatBuffers {
  float* params = nullptr;
  float* grads = nullptr;
  float* m = nullptr;
  float* v = nullptr;
};

// What one update measured, for the metrics log.
struct UpdateStats {
  double grad_norm = 0;     // global L2 norm of the (unscaled) gradients, before clipping
  double clip_divisor = 1;  // LAMB/AdamW: what every gradient was divided by (1 = no clip)
};

class Optimizer {
 public:
  virtual ~Optimizer() = default;
  const OptimizerConfig& config() const { return config_; }
  const std::string& name() const { return config_.name; }

  // Applies update number t (1-based count of applied updates, for bias correction) with
  // learning rate lr. REQUIRES: grads unscaled and finite; every buffer sized
  // table.total_elements(). Does not modify grads.
  virtual void update(const ParamTable& table, const FlatBuffers& buf, int64_t t, double lr,
                      UpdateStats* stats) = 0;

 protected:
  explicit Optimizer(OptimizerConfig c) : config_(std::move(c)) {}
  OptimizerConfig config_;
};

// Builds the rule named `name` ("lans", "lamb", "adamw"); the config's own name is
// overwritten with it. Fails with a message naming the field on an invalid config.
Status make_optimizer(const std::string& name, const OptimizerConfig& config,
                      std::unique_ptr<Optimizer>* out);
std::vector<std::string> optimizer_names();

}  // namespace lansbert
