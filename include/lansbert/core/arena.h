// Arena: a bump allocator over one Buffer, so a training step allocates nothing.
// The model lays out its activations twice with the same code: once over a counting arena
// (no memory, just the total) and once over the real one. Nothing is ever freed singly;
// the whole arena is released with its owner.
#pragma once

#include <cstddef>
#include <cstdint>

#include "lansbert/core/check.h"

namespace lansbert {

class Arena {
 public:
  static constexpr size_t kAlign = 256;  // every take() starts here: the alignment cuBLAS and vector loads like

  // A counting arena: take() returns nullptr and only adds up the bytes asked for.
  Arena() = default;
  // A real arena over [base, base + capacity).
  Arena(void* base, size_t capacity) : base_(static_cast<char*>(base)), capacity_(capacity) {}

  template <typename T>
  T* take(size_t n) {
    const size_t start = (used_ + kAlign - 1) / kAlign * kAlign;
    used_ = start + n * sizeof(T);
    if (!base_) return nullptr;
    LB_CHECK_MSG(used_ <= capacity_, "activation arena overflow");
    return reinterpret_cast<T*>(base_ + start);
  }
  size_t used() const { return used_; }
  // Bytes to reserve so that a real arena fits everything a counting pass asked for.
  size_t required() const { return used_ + kAlign; }

 private:
  char* base_ = nullptr;
  size_t capacity_ = 0;
  size_t used_ = 0;
};

}  // namespace lansbert
