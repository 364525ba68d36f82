// bf16 and fp16 conversion as shared math: the mixed-precision GEMMs round their operands
// with these bodies on the GPU (cast kernels) and on the CPU (the emulation the tests and
// `precision.dtype: bf16|fp16` on the CPU backend use), so both sides see the same operand
// values. Rounding is to nearest, ties to even; NaN stays a (quiet) NaN, and values beyond
// the format's range round to infinity as IEEE requires.
//   bf16: the top 16 bits of an fp32 (8 exponent bits, 7 mantissa bits).
//   fp16: IEEE binary16 (5 exponent bits, 10 mantissa bits, largest finite 65504,
//         subnormals down to 2^-24); what V100 tensor cores take, with loss scaling.
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

// The value x takes as a bf16 operand.
LB_HOST_DEVICE float round_to_bf16(float x) { return bf16_to_float(float_to_bf16(x)); }

// Returns the binary16 bit pattern nearest to x (ties to even).
LB_HOST_DEVICE uint16_t float_to_fp16(float x) {
  const uint32_t u = float_bits(x);
  const uint16_t sign = static_cast<uint16_t>((u >> 16) & 0x8000u);
  const uint32_t a = u & 0x7fffffffu;
  if (a > 0x7f800000u) return static_cast<uint16_t>(sign | 0x7e00u | ((a >> 13) & 0x3ffu));  // NaN
  // 65520 = 0x477ff000 is halfway between 65504 (odd mantissa) and 2^16: it and all above
  // round to infinity.
  if (a >= 0x477ff000u) return static_cast<uint16_t>(sign | 0x7c00u);
  if (a >= 0x38800000u) {  // normal in fp16 (>= 2^-14): rebias the exponent, round 13 bits away
    const uint32_t r = a + 0x0fffu + ((a >> 13) & 1u);
    return static_cast<uint16_t>(sign | ((r - (112u << 23)) >> 13));
  }
  // Subnormal in fp16: the result is x / 2^-24 rounded to an integer in [0, 1024] (1024 is
  // the smallest normal's bit pattern, so a carry lands there correctly).
  const uint32_t e = a >> 23;
  if (e < 102) return sign;  // below 2^-25: rounds to (signed) zero; float subnormals too
  const uint32_t m = (a & 0x7fffffu) | 0x800000u, shift = 126u - e;  // shift in [14, 24]
  uint32_t q = m >> shift;
  const uint32_t rem = m & ((1u << shift) - 1u), half = 1u << (shift - 1u);
  if (rem > half || (rem == half && (q & 1u))) ++q;
  return static_cast<uint16_t>(sign | q);
}

LB_HOST_DEVICE float fp16_to_float(uint16_t h) {
  const uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
  const uint32_t e = (h >> 10) & 0x1fu, m = h & 0x3ffu;
  if (e == 0x1fu) return bits_float(sign | 0x7f800000u | (m << 13));  // inf, NaN
  if (e == 0) {  // zero or subnormal: m * 2^-24, exact in float
    const float v = static_cast<float>(m) * 5.9604644775390625e-08f;
    return sign ? -v : v;
  }
  return bits_float(sign | ((e + 112u) << 23) | (m << 13));
}

// The value x takes as an fp16 operand.
LB_HOST_DEVICE float round_to_fp16(float x) { return fp16_to_float(float_to_fp16(x)); }

// Which 16-bit format a stored copy holds (the optimizer's weight copy, FlatBuffers).
enum class HalfFormat : uint8_t { kBf16, kFp16 };

LB_HOST_DEVICE uint16_t float_to_half(float x, HalfFormat f) {
  return f == HalfFormat::kBf16 ? float_to_bf16(x) : float_to_fp16(x);
}
LB_HOST_DEVICE float half_to_float(uint16_t h, HalfFormat f) {
  return f == HalfFormat::kBf16 ? bf16_to_float(h) : fp16_to_float(h);
}

}  // namespace lansbert::kern
