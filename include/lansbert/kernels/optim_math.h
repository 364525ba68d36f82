// Per-element arithmetic of the optimizers (LANS, LAMB, AdamW) and of the loss scaler's
// finiteness check, written once as LB_HOST_DEVICE inline functions templated on the float
// type. The CPU multi-tensor launcher (src/optim) calls them in OpenMP loops; a CUDA kernel
// will call the same bodies per thread, so the CPU tests exercise the GPU's math.
// Per-block scalars (norms, trust ratios, bias corrections) are computed by the launcher and
// passed in; nothing here reduces. Only sqrt/sqrtf from <math.h>, which exist on device.
#pragma once

#include <math.h>

#include "lansbert/core/host_device.h"

namespace lansbert {

LB_HOST_DEVICE float optim_sqrt(float x) {
  return sqrtf(x);
}
LB_HOST_DEVICE double optim_sqrt(double x) {
  return sqrt(x);
}

// True iff x is neither inf nor NaN: inf - inf and NaN - NaN are NaN, which compares unequal
// to 0. Valid because the project never builds with fast-math.
template <typename T>
LB_HOST_DEVICE bool optim_is_finite(T x) {
  return (x - x) == T(0);
}

// Constants of one update, shared by every element. inv_bc1 = 1/(1-b1^t) and
// inv_bc2 = 1/(1-b2^t) are computed once per step in double and rounded to T.
template <typename T>
struct AdamConsts {
  T b1, one_minus_b1;
  T b2, one_minus_b2;
  T inv_bc1, inv_bc2;
  T eps;
};

// m = b1*m + (1-b1)*g;  v = b2*v + (1-b2)*g*g. For LANS, g is the normalised gradient gh.
template <typename T>
LB_HOST_DEVICE void adam_moments(T g, const AdamConsts<T>& c, T& m, T& v) {
  m = c.b1 * m + c.one_minus_b1 * g;
  v = c.b2 * v + c.one_minus_b2 * g * g;
}

// 1 / (sqrt(v/(1-b2^t)) + eps): eps outside the square root, as apex and the LANS code do.
template <typename T>
LB_HOST_DEVICE T adam_inv_denom(T v, const AdamConsts<T>& c) {
  return T(1) / (optim_sqrt(v * c.inv_bc2) + c.eps);
}

// LAMB and AdamW direction: u = mhat / (sqrt(vhat) + eps) + wd*p, with the pre-update p.
template <typename T>
LB_HOST_DEVICE T adam_direction(T m, T v, T p, T wd, const AdamConsts<T>& c) {
  return (m * c.inv_bc1) * adam_inv_denom(v, c) + wd * p;
}

// LANS's two directions (paper eq. for u_m and u_g): the momentum term and the
// normalised-gradient term share the denominator and the decay.
template <typename T>
struct LansDirections {
  T um;
  T ug;
};

template <typename T>
LB_HOST_DEVICE LansDirections<T> lans_directions(T gh, T m, T v, T p, T wd,
                                                 const AdamConsts<T>& c) {
  const T inv_d = adam_inv_denom(v, c);
  const T decay = wd * p;
  return {(m * c.inv_bc1) * inv_d + decay, gh * inv_d + decay};
}

// p - step_m*u_m - step_g*u_g, where step_m = lr*b1*r_m and step_g = lr*(1-b1)*r_g.
template <typename T>
LB_HOST_DEVICE T lans_apply(T p, LansDirections<T> u, T step_m, T step_g) {
  return p - step_m * u.um - step_g * u.ug;
}

// Block trust ratio ||p|| / ||u||; 1 when either norm is 0 (a zero-initialised bias, or a
// block whose update vanished). No clamp, as in LANS, apex LAMB and NVLAMB.
template <typename T>
LB_HOST_DEVICE T trust_ratio(T param_norm, T update_norm) {
  return (param_norm == T(0) || update_norm == T(0)) ? T(1) : param_norm / update_norm;
}

}  // namespace lansbert
