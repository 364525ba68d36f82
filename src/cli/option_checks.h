// Validators for command-line numbers where CLI11's own conversions and checks let a bad value
// through: "-1" read into an unsigned seed becomes 2^64 - 1, and CLI::Range accepts NaN (every
// comparison with it is false).
#pragma once

#include <charconv>
#include <cstdint>
#include <string>

#include <CLI/CLI.hpp>
#include <fmt/format.h>

namespace lansbert::cli {

// A decimal that fits an unsigned 64-bit seed, and nothing else.
inline std::string unsigned_seed(std::string& text) {
  uint64_t v = 0;
  const char* end = text.data() + text.size();
  const auto [ptr, ec] = std::from_chars(text.data(), end, v);
  if (text.empty() || ec != std::errc() || ptr != end)
    return "'" + text + "': the seed is unsigned 64-bit, a decimal integer in [0, 18446744073709551615]";
  return "";
}
inline CLI::Validator unsigned_seed_check() { return CLI::Validator(unsigned_seed, "UINT64"); }

// A number in [lo, hi]: not NaN, not infinite.
inline CLI::Validator number_in(double lo, double hi) {
  return CLI::Validator(
      [lo, hi](std::string& text) -> std::string {
        double v = 0;
        const char* end = text.data() + text.size();
        const auto [ptr, ec] = std::from_chars(text.data(), end, v);
        if (text.empty() || ec != std::errc() || ptr != end || !(v >= lo && v <= hi))
          return fmt::format("'{}' is not a number in [{:g}, {:g}]", text, lo, hi);
        return "";
      },
      fmt::format("FLOAT in [{:g} - {:g}]", lo, hi));
}

}  // namespace lansbert::cli
