// SeenDocuments: the set of document hashes a prep run has met, for `--dedup` (and the band
// keys of `--near-dedup`: near_duplicates.h). The hashes
// (document_hash) are already uniformly spread 64-bit numbers, so an open-addressing table
// indexed by their low bits needs no further hashing: 8 bytes a slot, kept at most half
// full, so 16 to 32 bytes per distinct document (about 200 MB for English Wikipedia's 6.7
// million articles), and twice that for a moment while it grows.
#pragma once

#include <cstdint>
#include <vector>

namespace lansbert {

class SeenDocuments {
 public:
  // Adds `hash`; false when it was there already.
  bool insert(uint64_t hash) {
    hash = key(hash);
    if (2 * (size_ + 1) > slots_.size()) grow();
    uint64_t& slot = slots_[slot_of(hash)];
    if (slot == hash) return false;
    slot = hash;
    ++size_;
    return true;
  }
  bool contains(uint64_t hash) const {
    hash = key(hash);
    return !slots_.empty() && slots_[slot_of(hash)] == hash;
  }
  size_t size() const { return size_; }
  size_t bytes() const { return slots_.size() * sizeof(uint64_t); }

 private:
  static constexpr uint64_t kEmpty = 0;
  // 0 marks a free slot; a hash of 0 is stored as 1 (the two share a key: 1 in 2^63 odds).
  static uint64_t key(uint64_t hash) { return hash == kEmpty ? 1 : hash; }
  // Where `k` is, or the free slot where it would go (linear probing from its low bits).
  size_t slot_of(uint64_t k) const {
    size_t i = k & mask_;
    while (slots_[i] != k && slots_[i] != kEmpty) i = (i + 1) & mask_;
    return i;
  }
  void grow() {
    std::vector<uint64_t> old(slots_.size() ? 2 * slots_.size() : 1024, kEmpty);
    old.swap(slots_);
    mask_ = slots_.size() - 1;
    for (const uint64_t h : old) {
      if (h != kEmpty) slots_[slot_of(h)] = h;  // distinct: each lands on a free slot
    }
  }
  std::vector<uint64_t> slots_;
  size_t mask_ = 0;
  size_t size_ = 0;
};

}  // namespace lansbert
