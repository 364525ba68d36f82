// Private to src/optim: constructors of the three update rules, so optimizer.cc can select
// by name without knowing the classes. (Their shared per-step constants are public, in
// optimizer.h, because the CUDA kernels use them too.)
#pragma once

#include <cstdint>
#include <memory>

#include "lansbert/optim/optimizer.h"

namespace lansbert {

std::unique_ptr<Optimizer> make_lans(const OptimizerConfig& c);
std::unique_ptr<Optimizer> make_lamb(const OptimizerConfig& c);
std::unique_ptr<Optimizer> make_adamw(const OptimizerConfig& c);

}  // namespace lansbert
