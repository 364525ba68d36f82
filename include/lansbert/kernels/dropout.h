// Element math of dropout. The keep decision for element e is a pure function of the
// stream key (seed, micro-step, site) and e, so the mask is never stored: the backward pass
// redraws it, every thread count and every device draws the same mask, and a resumed run
// repeats it.
#pragma once

#include <cstdint>

#include "lansbert/core/philox.h"

namespace lansbert::kern {

// Returns true iff element e is kept at drop probability p (p in [0, 1)).
LB_HOST_DEVICE bool dropout_keep(RngKey key, uint64_t e, float p) {
  return uniform01(philox_bits(key, e)) >= p;
}

// Inverted dropout: kept values are scaled by 1/(1-p) so the expectation is unchanged.
// Forward and backward are the same map (y = m x / (1-p), dx = m dy / (1-p)).
template <typename T>
LB_HOST_DEVICE T dropout_apply(T x, RngKey key, uint64_t e, float p) {
  return dropout_keep(key, e, p) ? x * (T(1) / (T(1) - T(p))) : T(0);
}

}  // namespace lansbert::kern
