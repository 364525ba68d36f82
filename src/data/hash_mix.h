// hash_mix: folds one 64-bit value into a running hash with splitmix64's finalizer (a good
// 64-bit mix, cheap next to tokenizing). document_hash (the held-out split and --dedup) and
// --near-dedup's shingles and band keys are made with it; what those hash is fixed for good
// (a held-out set depends on it), so this function is too. Private to src/data.
#pragma once

#include <cstdint>

namespace lansbert {

inline uint64_t hash_mix(uint64_t h, uint64_t x) {
  uint64_t z = h ^ (x + 0x9e3779b97f4a7c15ULL);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

inline constexpr uint64_t kHashSeed = 0x6c616e7362657274ULL;  // "lansbert"

}  // namespace lansbert
