// Buffer<T>: an owning, typed, non-copyable block of memory from an Allocator.
// Parameters, gradients, moments and the activation arena are each one Buffer.
#pragma once

#include <cstddef>
#include <utility>

#include "lansbert/core/allocator.h"

namespace lansbert {

template <typename T>
class Buffer {
 public:
  Buffer() = default;
  explicit Buffer(size_t n, Allocator& a = host_allocator()) : alloc_(&a), size_(n) {
    data_ = n ? static_cast<T*>(a.allocate(n * sizeof(T))) : nullptr;
  }
  ~Buffer() { reset(); }
  Buffer(const Buffer&) = delete;
  Buffer& operator=(const Buffer&) = delete;
  Buffer(Buffer&& o) noexcept { swap(o); }
  Buffer& operator=(Buffer&& o) noexcept {
    if (this != &o) {
      reset();
      swap(o);
    }
    return *this;
  }

  T* data() { return data_; }
  const T* data() const { return data_; }
  size_t size() const { return size_; }
  size_t bytes() const { return size_ * sizeof(T); }
  Allocator* allocator() const { return alloc_; }
  // Host buffers only: element access for tests and host-side code.
  T& operator[](size_t i) { return data_[i]; }
  const T& operator[](size_t i) const { return data_[i]; }
  T* begin() { return data_; }
  T* end() { return data_ + size_; }
  const T* begin() const { return data_; }
  const T* end() const { return data_ + size_; }

  void zero() {
    if (data_) alloc_->set_zero(data_, bytes());
  }
  void reset() {
    if (data_) alloc_->deallocate(data_);
    data_ = nullptr;
    size_ = 0;
  }

 private:
  void swap(Buffer& o) {
    std::swap(alloc_, o.alloc_);
    std::swap(data_, o.data_);
    std::swap(size_, o.size_);
  }
  Allocator* alloc_ = nullptr;
  T* data_ = nullptr;
  size_t size_ = 0;
};

}  // namespace lansbert
