// IEEE binary16 values as bit patterns and back, through the compiler's own _Float16: the
// independent reference the fp16 rounding tests compare lansbert's bodies with.
#pragma once

#include <cstdint>
#include <cstring>

namespace lansbert::testing {

inline uint16_t f16_bits(_Float16 h) {
  uint16_t u;
  std::memcpy(&u, &h, sizeof u);
  return u;
}
inline _Float16 bits_to_f16(uint16_t u) {
  _Float16 h;
  std::memcpy(&h, &u, sizeof h);
  return h;
}

}  // namespace lansbert::testing
