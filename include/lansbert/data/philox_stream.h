// PhiloxStream: a sequence of random draws read from one Philox stream (core/philox.h), so
// that every random choice of the data pipeline is a pure function of its key: (seed,
// document, dupe pass, purpose) when instances are created, (seed, epoch, sample) when a
// stored sequence is masked at load time. No state is shared between documents, so any
// number of threads produces the same instances.
#pragma once

#include <cstdint>

#include "lansbert/core/philox.h"

namespace lansbert {

class PhiloxStream {
 public:
  // Draws elements base, base+1, ... of the stream `key`.
  explicit PhiloxStream(RngKey key, uint64_t base = 0) : key_(key), next_(base) {}

  uint32_t next_u32() {
    // philox_bits computes a whole 4-word block; keep it and hand the words out in turn.
    if ((next_ & 3) == 0 || !have_block_) {
      const uint64_t block = next_ >> 2;
      block_ = philox4x32_10(Philox4x32{{static_cast<uint32_t>(block), static_cast<uint32_t>(block >> 32),
                                         key_.site, key_.step}},
                             static_cast<uint32_t>(key_.seed), static_cast<uint32_t>(key_.seed >> 32));
      have_block_ = true;
    }
    return block_.v[next_++ & 3];
  }
  // Uniform in [0, 1) with 53 random bits, as Python's random.random() has.
  double uniform() {
    const uint64_t hi = next_u32() >> 5, lo = next_u32() >> 6;
    return (static_cast<double>(hi) * 67108864.0 + static_cast<double>(lo)) * (1.0 / 9007199254740992.0);
  }
  // Uniform integer in [0, n) for n >= 1 (multiply-shift; bias below 2^-32 * n).
  uint32_t below(uint32_t n) { return static_cast<uint32_t>((static_cast<uint64_t>(next_u32()) * n) >> 32); }
  // Uniform integer in [lo, hi], both inclusive, as Python's randint.
  int randint(int lo, int hi) { return lo + static_cast<int>(below(static_cast<uint32_t>(hi - lo + 1))); }

 private:
  RngKey key_;
  uint64_t next_;
  Philox4x32 block_{};
  bool have_block_ = false;
};

}  // namespace lansbert
