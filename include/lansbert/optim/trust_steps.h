// The per-block step sizes of LANS and LAMB, formed from the whole-tensor norms once the
// moments pass has left each block's squared update norms in `sums`, with the layer-wise trust
// ratios for UpdateStats. One definition for the CPU rules (src/optim/lans.cc, lamb.cc) and the
// CUDA optimizer (cuda/cuda_optim.cu), so the ratios the metrics show are formed the same way
// on both backends; the arithmetic is double, rounded to float once per step size.
#pragma once

#include <cmath>
#include <cstddef>

#include "lansbert/kernels/optim_math.h"
#include "lansbert/optim/optimizer.h"

namespace lansbert {

// LANS (docs/optimizers.md): the momentum direction's ratio r_m = ||p|| / ||u_m|| (sums[2b] is
// ||u_m||^2) and the gradient direction's r_g (sums[2b + 1]), for steps lr b1 r_m and
// lr (1 - b1) r_g: set(b, step_m, step_g). param_norm(b) is ||p_b||.
template <typename ParamNorm, typename SetSteps>
void lans_step_sizes(const OptimizerConfig& c, double lr, size_t blocks, const double* sums,
                     ParamNorm param_norm, SetSteps set, UpdateStats* stats) {
  if (stats) {
    stats->trust_ratio.resize(blocks);
    stats->trust_ratio_grad.resize(blocks);
  }
  for (size_t b = 0; b < blocks; ++b) {
    const double r_m = trust_ratio(double(param_norm(b)), std::sqrt(sums[2 * b]));
    const double r_g = trust_ratio(double(param_norm(b)), std::sqrt(sums[2 * b + 1]));
    set(b, static_cast<float>(lr * c.beta1 * r_m), static_cast<float>(lr * (1.0 - c.beta1) * r_g));
    if (stats) {
      stats->trust_ratio[b] = r_m;
      stats->trust_ratio_grad[b] = r_g;
    }
  }
}

// LAMB: r = ||p|| / ||u|| (sums[b] is ||u||^2) for a block with weight decay, or every block
// with trust_ratio_on_excluded; 1 otherwise (apex's excluded biases and LayerNorms), recorded
// as NaN. set(b, lr r). decay(b) is the block's weight decay.
template <typename ParamNorm, typename Decay, typename SetStep>
void lamb_step_sizes(const OptimizerConfig& c, double lr, size_t blocks, const double* sums,
                     ParamNorm param_norm, Decay decay, SetStep set, UpdateStats* stats) {
  if (stats) {
    stats->trust_ratio.resize(blocks);
    stats->trust_ratio_grad.clear();
  }
  for (size_t b = 0; b < blocks; ++b) {
    const bool use_ratio = decay(b) != 0 || c.trust_ratio_on_excluded;
    const double r = use_ratio ? trust_ratio(double(param_norm(b)), std::sqrt(sums[b])) : 1.0;
    set(b, static_cast<float>(lr * r));
    if (stats) stats->trust_ratio[b] = use_ratio ? r : std::nan("");
  }
}

}  // namespace lansbert
