// Arena: a bump allocator over one Buffer, so a training step allocates nothing.
// The model lays out its activations twice with the same code: once over a counting arena
// (no memory, just the totals) and once over the real one. Nothing is ever freed singly;
// the whole arena is released with its owner.
// Besides memory, an arena hands out addresses only (take_key): spans that key a backend's
// 16-bit copy of an output never written in T (Ops::kept_outputs_unwritten), taken from an
// AddressRange, so they cost nothing and any access to them faults.
#pragma once

#include <cstddef>
#include <cstdint>

#include "lansbert/core/check.h"

namespace lansbert {

class Arena {
 public:
  static constexpr size_t kAlign = 256;  // every take() starts here: the alignment cuBLAS and vector loads like

  // A counting arena: take() and take_key() return nullptr and only add up the bytes asked for.
  Arena() = default;
  // A real arena over [base, base + capacity), its keys from [key_base, key_base + key_capacity).
  Arena(void* base, size_t capacity, void* key_base = nullptr, size_t key_capacity = 0)
      : base_(static_cast<char*>(base)), capacity_(capacity), key_base_(static_cast<char*>(key_base)),
        key_capacity_(key_capacity) {}

  template <typename T>
  T* take(size_t n) {
    return bump<T>(n, base_, capacity_, &used_, "activation arena overflow");
  }
  // n elements' worth of addresses with no memory behind them: only a key.
  template <typename T>
  T* take_key(size_t n) {
    return bump<T>(n, key_base_, key_capacity_, &key_used_, "activation arena: key addresses overflow");
  }
  size_t used() const { return used_; }
  // Bytes to reserve so that a real arena fits everything a counting pass asked for.
  size_t required() const { return used_ + kAlign; }
  size_t key_required() const { return key_used_ ? key_used_ + kAlign : 0; }

 private:
  template <typename T>
  T* bump(size_t n, char* base, size_t capacity, size_t* used, const char* overflow) {
    const size_t start = (*used + kAlign - 1) / kAlign * kAlign;
    *used = start + n * sizeof(T);
    if (!base_) return nullptr;  // counting
    LB_CHECK_MSG(base != nullptr && *used <= capacity, overflow);
    return reinterpret_cast<T*>(base + start);
  }

  char* base_ = nullptr;
  size_t capacity_ = 0;
  char* key_base_ = nullptr;
  size_t key_capacity_ = 0;
  size_t used_ = 0, key_used_ = 0;
};

}  // namespace lansbert
