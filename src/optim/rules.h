// Private to src/optim: constructors of the three update rules and the per-step constants
// they share, so optimizer.cc can select by name without knowing the classes.
#pragma once

#include <cstdint>
#include <memory>

#include "lansbert/kernels/optim_math.h"
#include "lansbert/optim/optimizer.h"

namespace lansbert {

std::unique_ptr<Optimizer> make_lans(const OptimizerConfig& c);
std::unique_ptr<Optimizer> make_lamb(const OptimizerConfig& c);
std::unique_ptr<Optimizer> make_adamw(const OptimizerConfig& c);

// b1, b2, eps and the bias corrections 1/(1-b^t) for update t, computed in double and
// rounded once to float.
AdamConsts<float> adam_consts(const OptimizerConfig& c, int64_t t);

// apex FusedLAMB's clipping: G / max_grad_norm when G exceeds max_grad_norm (> 0), else 1.
double clip_divisor(double global_grad_norm, double max_grad_norm);

}  // namespace lansbert
