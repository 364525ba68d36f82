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
#include <type_traits>

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

// Returns the bf16 bit pattern nearest to x (ties to even). Both candidates are computed and
// one selected, so that host loops over these bodies vectorise (a branch stops GCC).
LB_HOST_DEVICE uint16_t float_to_bf16(float x) {
  const uint32_t u = float_bits(x);
  const uint16_t nan = static_cast<uint16_t>((u >> 16) | 0x0040u);  // quiet, sign and payload kept
  const uint16_t rounded = static_cast<uint16_t>((u + 0x7fffu + ((u >> 16) & 1u)) >> 16);
  return (u & 0x7fffffffu) > 0x7f800000u ? nan : rounded;
}

LB_HOST_DEVICE float bf16_to_float(uint16_t h) {
  return bits_float(static_cast<uint32_t>(h) << 16);
}

// The value x takes as a bf16 operand.
LB_HOST_DEVICE float round_to_bf16(float x) { return bf16_to_float(float_to_bf16(x)); }

// Returns the binary16 bit pattern nearest to x (ties to even). Branch-free like
// float_to_bf16: the four candidates (NaN, infinity, normal, subnormal) are all computed and
// one selected.
LB_HOST_DEVICE uint16_t float_to_fp16(float x) {
  const uint32_t u = float_bits(x);
  const uint32_t sign = (u >> 16) & 0x8000u;
  const uint32_t a = u & 0x7fffffffu;
  const uint32_t nan = sign | 0x7e00u | ((a >> 13) & 0x3ffu);
  const uint32_t inf = sign | 0x7c00u;
  // Normal in fp16 (|x| >= 2^-14): rebias the exponent, round 13 mantissa bits away (a carry
  // into the exponent is the correct next binade).
  const uint32_t r = a + 0x0fffu + ((a >> 13) & 1u);
  const uint32_t normal = sign | ((r - (112u << 23)) >> 13);
  // Subnormal in fp16 (|x| < 2^-14): the result is |x| / 2^-24 rounded to an integer in
  // [0, 1024] (1024 is the smallest normal's pattern, so a carry lands there correctly).
  // |x| * 2^24 is exact and below 2^10; adding 1.5 * 2^23 leaves float no fraction bits, so
  // the addition itself rounds to the nearest integer, ties to even, and the integer is the
  // low bits of the sum. Float subnormals become 0 the same way.
  const uint32_t sub = sign | (float_bits(bits_float(a) * 16777216.0f + 12582912.0f) - 0x4b400000u);
  // 65520 = 0x477ff000 is halfway between 65504 (odd mantissa) and 2^16: it and all above
  // round to infinity.
  const uint32_t finite = a >= 0x38800000u ? normal : sub;
  const uint32_t out = a > 0x7f800000u ? nan : a >= 0x477ff000u ? inf : finite;
  return static_cast<uint16_t>(out);
}

LB_HOST_DEVICE float fp16_to_float(uint16_t h) {
  const uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
  const uint32_t e = (h >> 10) & 0x1fu, m = h & 0x3ffu;
  const uint32_t special = sign | 0x7f800000u | (m << 13);  // inf, NaN
  const uint32_t sub = sign | float_bits(static_cast<float>(m) * 5.9604644775390625e-08f);  // m * 2^-24, exact
  const uint32_t normal = sign | ((e + 112u) << 23) | (m << 13);
  return bits_float(e == 0x1fu ? special : e == 0 ? sub : normal);
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
// x at its rounding to f (round_to_bf16 / round_to_fp16 by a format chosen at run time).
LB_HOST_DEVICE float round_to_half(float x, HalfFormat f) { return half_to_float(float_to_half(x, f), f); }

// Calls fn(std::integral_constant<HalfFormat, f>{}): the format becomes a constant inside fn,
// so a host loop there converts without a per-element format test and vectorises.
template <typename Fn>
decltype(auto) with_half_format(HalfFormat f, Fn&& fn) {
  using Bf16 = std::integral_constant<HalfFormat, HalfFormat::kBf16>;
  using Fp16 = std::integral_constant<HalfFormat, HalfFormat::kFp16>;
  return f == HalfFormat::kBf16 ? fn(Bf16{}) : fn(Fp16{});
}

}  // namespace lansbert::kern
