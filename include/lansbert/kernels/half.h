// bf16 conversion as shared math: the bf16 copy of the weights that the GPU optimizer writes
// for mixed-precision GEMMs, and the CPU reference that tests compare it with, round the same
// way. bf16 is the top 16 bits of an fp32; rounding is to nearest, ties to even; NaN stays a
// (quiet) NaN, and values beyond the bf16 range round to infinity as IEEE requires.
#pragma once

#include <cstdint>
#include <cstring>

#include "lansbert/core/host_device.h"

namespace lansbert::kern {

LB_HOST_DEVICE uint32_t float_bits(float x) {
  uint32_t u;
  memcpy(&u, &x, sizeof u);
  return u;
}

LB_HOST_DEVICE float bits_float(uint32_t u) {
  float x;
  memcpy(&x, &u, sizeof x);
  return x;
}

// Returns the bf16 bit pattern nearest to x (ties to even).
LB_HOST_DEVICE uint16_t float_to_bf16(float x) {
  const uint32_t u = float_bits(x);
  if ((u & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((u >> 16) | 0x0040u);  // NaN
  const uint32_t rounding = 0x7fffu + ((u >> 16) & 1u);
  return static_cast<uint16_t>((u + rounding) >> 16);
}

LB_HOST_DEVICE float bf16_to_float(uint16_t h) {
  return bits_float(static_cast<uint32_t>(h) << 16);
}

}  // namespace lansbert::kern
