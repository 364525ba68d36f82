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
#include <functional>
#include <limits>
#include <memory>
#include <string>
#include <vector>

#include "lansbert/core/status.h"
#include "lansbert/kernels/half.h"
#include "lansbert/kernels/optim_math.h"
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
  // Optional 16-bit copy of the parameters (same layout and memory as params): every update
  // also writes kern::float_to_half(new p, half_format) for each element it updates, in the
  // same pass. 16-bit GEMMs then read the weights from it instead of casting them every
  // micro-step (BertModel::weight_copy). A sharded update writes its slice only.
  uint16_t* half_params = nullptr;
  kern::HalfFormat half_format = kern::HalfFormat::kBf16;
};

// What one update measured, for the metrics log.
struct UpdateStats {
  double grad_norm = 0;     // global L2 norm of the (unscaled) gradients, before clipping
  double clip_divisor = 1;  // LAMB/AdamW: what every gradient was divided by (1 = no clip)
  // Per block of the table, the layer-wise trust ratio ||p|| / ||u|| the update applied:
  // LAMB's one ratio (NaN for a block it leaves without, apex's excluded biases and
  // LayerNorms); LANS's ratio of the momentum direction u_m, with trust_ratio_grad that of the
  // gradient direction u_g. Empty for AdamW. Whole-tensor norms, so the same on every rank
  // of a sharded update. The diagnostic of large-batch runs (You et al. 2020, figure 2).
  std::vector<double> trust_ratio, trust_ratio_grad;
};

// Sharded optimizer state (ZeRO-1, ../shared/docs/DESIGN.md decision 6): this rank updates only elements
// [begin, end) of the flat buffers, and FlatBuffers::m and ::v hold only those elements
// (m[0] is element `begin`). Blocks that straddle the slice get whole-tensor norms because
// every per-block partial sum (||g||^2, ||p||^2, ||u||^2) over the local part is passed to
// reduce_sums, which sums it over the ranks (the dist layer's all-reduce in double), before
// any norm is used. The default (no reduce_sums, begin 0, end max) is the unsharded rule.
struct ShardSpec {
  size_t begin = 0;
  size_t end = std::numeric_limits<size_t>::max();
  std::function<void(double* sums, size_t n)> reduce_sums;
  bool sharded() const { return static_cast<bool>(reduce_sums); }
};

class Optimizer {
 public:
  // Restricts later updates to a shard (see ShardSpec).
  void set_shard(ShardSpec shard) { shard_ = std::move(shard); }
  const ShardSpec& shard() const { return shard_; }

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
  // Sums per-block partials over the ranks of a sharded update; no-op unsharded.
  void reduce_sums(std::vector<double>* sums) const {
    if (shard_.reduce_sums) shard_.reduce_sums(sums->data(), sums->size());
  }
  OptimizerConfig config_;
  ShardSpec shard_;
};

// Builds the rule named `name` ("lans", "lamb", "adamw"); the config's own name is
// overwritten with it. Fails with a message naming the field on an invalid config.
Status make_optimizer(const std::string& name, const OptimizerConfig& config,
                      std::unique_ptr<Optimizer>* out);
std::vector<std::string> optimizer_names();

// Per-step scalars every implementation of the rules shares (the CPU rules in src/optim and
// the CUDA kernels): b1, b2, eps and the bias corrections 1/(1-b^t) for update t, computed in
// double and rounded once to float.
AdamConsts<float> adam_consts(const OptimizerConfig& c, int64_t t);

// apex FusedLAMB's clipping: G / max_grad_norm when G exceeds max_grad_norm (> 0), else 1.
double clip_divisor(double global_grad_norm, double max_grad_norm);

}  // namespace lansbert
