// OptimizerConfig validation, the role-based weight-decay policy, and selection of an update
// rule by name.
#include "lansbert/optim/optimizer.h"

#include <cmath>

#include "rules.h"

namespace lansbert {

Status OptimizerConfig::validate() const {
  if (!(beta1 >= 0 && beta1 < 1)) {
    return Status::invalid_argument("optimizer.beta1 must be in [0, 1), got " +
                                    std::to_string(beta1));
  }
  if (!(beta2 >= 0 && beta2 < 1)) {
    return Status::invalid_argument("optimizer.beta2 must be in [0, 1), got " +
                                    std::to_string(beta2));
  }
  if (!(eps > 0)) {
    return Status::invalid_argument("optimizer.eps must be > 0, got " + std::to_string(eps));
  }
  if (!(weight_decay >= 0) || !std::isfinite(weight_decay)) {
    return Status::invalid_argument("optimizer.weight_decay must be finite and >= 0, got " +
                                    std::to_string(weight_decay));
  }
  if (std::isnan(max_grad_norm)) {
    return Status::invalid_argument("optimizer.max_grad_norm must be a number (<= 0 disables)");
  }
  return Status::ok();
}

double OptimizerConfig::decay_for(ParamRole role) const {
  for (ParamRole r : no_decay_roles) {
    if (r == role) return 0.0;
  }
  return weight_decay;
}

AdamConsts<float> adam_consts(const OptimizerConfig& c, int64_t t) {
  const double bc1 = 1.0 - std::pow(c.beta1, static_cast<double>(t));
  const double bc2 = 1.0 - std::pow(c.beta2, static_cast<double>(t));
  AdamConsts<float> k;
  k.b1 = static_cast<float>(c.beta1);
  k.one_minus_b1 = static_cast<float>(1.0 - c.beta1);
  k.b2 = static_cast<float>(c.beta2);
  k.one_minus_b2 = static_cast<float>(1.0 - c.beta2);
  // beta = 0 gives bc = 1; bc > 0 for every t >= 1 and beta < 1.
  k.inv_bc1 = static_cast<float>(1.0 / bc1);
  k.inv_bc2 = static_cast<float>(1.0 / bc2);
  k.eps = static_cast<float>(c.eps);
  return k;
}

double clip_divisor(double global_grad_norm, double max_grad_norm) {
  if (max_grad_norm > 0 && global_grad_norm > max_grad_norm) {
    return global_grad_norm / max_grad_norm;
  }
  return 1.0;
}

std::vector<std::string> optimizer_names() {
  return {"lans", "lamb", "adamw"};
}

Status make_optimizer(const std::string& name, const OptimizerConfig& config,
                      std::unique_ptr<Optimizer>* out) {
  OptimizerConfig c = config;
  c.name = name;
  LB_RETURN_IF_ERROR(c.validate());
  if (name == "lans") {
    *out = make_lans(c);
  } else if (name == "lamb") {
    *out = make_lamb(c);
  } else if (name == "adamw") {
    *out = make_adamw(c);
  } else {
    return Status::invalid_argument("optimizer.name: unknown optimizer '" + name +
                                    "' (expected lans, lamb or adamw)");
  }
  return Status::ok();
}

}  // namespace lansbert
