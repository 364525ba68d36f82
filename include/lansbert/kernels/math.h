// Scalar math that resolves to the right precision on host and device: erff/erf, expf/exp
// and so on. std:: overloads do not exist in device code, so the shared bodies call these.
#pragma once

#include <math.h>

#include "lansbert/core/host_device.h"
#include "lansbert/kernels/fast_math.h"

namespace lansbert::kern {

// Float exp is the vectorisable exp_f32 (fast_math.h), shared with the GPU kernels.
LB_HOST_DEVICE float lb_exp(float x) { return exp_f32(x); }
LB_HOST_DEVICE double lb_exp(double x) { return exp(x); }
LB_HOST_DEVICE float lb_log(float x) { return logf(x); }
LB_HOST_DEVICE double lb_log(double x) { return log(x); }
LB_HOST_DEVICE float lb_erf(float x) { return erff(x); }
LB_HOST_DEVICE double lb_erf(double x) { return erf(x); }
LB_HOST_DEVICE float lb_tanh(float x) { return tanhf(x); }
LB_HOST_DEVICE double lb_tanh(double x) { return tanh(x); }
LB_HOST_DEVICE float lb_sqrt(float x) { return sqrtf(x); }
LB_HOST_DEVICE double lb_sqrt(double x) { return sqrt(x); }

}  // namespace lansbert::kern
