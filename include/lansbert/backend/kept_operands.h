// KeptOperands: the spans a backend keeps converted for its GEMMs (Ops::keep_gemm_operand),
// keyed by their first element, and where a GEMM operand lies inside one. Shared by the CPU
// emulation (Store = std::vector<T>) and CudaOps (Store = DeviceBytes); the backend fills the
// store keep() returns and reads the one find() returns.
//
// A store stays with its address after drop(): the model keeps the same activation, gradient
// and parameter buffers every micro-step, so the copies are allocated once (growth of a
// device buffer synchronises the device). At the end of a backward nearly all of them are
// dropped, so freeing what is not kept *now* would reallocate everything every step: stores
// are handed back by take_unused() only when there are more than kSpare beyond the most
// spans ever kept at once (addresses that come and go: tests, ephemeral buffers).
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <vector>

#include "lansbert/core/check.h"

namespace lansbert {

template <typename T, typename Store>
class KeptOperands {
 public:
  static constexpr size_t kSpare = 64;

  // Keeps x[0, n) (again, if it was kept: the caller says its contents changed) and returns
  // its store, at least as large as it last was. A span may not overlap another kept one.
  Store& keep(const T* x, size_t n) {
    const uintptr_t b = addr(x);
    LB_CHECK_MSG(n > 0, "keep_gemm_operand: empty span");
    auto next = active_.upper_bound(b);
    LB_CHECK_MSG(next == active_.end() || next->first >= b + n * sizeof(T),
                 "keep_gemm_operand: the span overlaps another kept span");
    if (next != active_.begin()) {
      auto prev = std::prev(next);
      LB_CHECK_MSG(prev->first == b || prev->first + prev->second * sizeof(T) <= b,
                   "keep_gemm_operand: the span overlaps another kept span");
    }
    active_[b] = n;
    peak_ = std::max(peak_, active_.size());
    std::unique_ptr<Store>& s = stores_[b];
    if (!s) s = std::make_unique<Store>();
    return *s;
  }

  // Not kept any more (a no-op when it was not).
  void drop(const T* x) { active_.erase(addr(x)); }

  // The store whose kept span holds all of x[0, m), with x's offset in elements; nullptr when
  // none does.
  const Store* find(const T* x, size_t m, size_t* offset) const {
    if (active_.empty() || m == 0) return nullptr;
    const uintptr_t p = addr(x);
    auto it = active_.upper_bound(p);
    if (it == active_.begin()) return nullptr;
    --it;
    if ((p - it->first) % sizeof(T) != 0) return nullptr;
    const size_t off = (p - it->first) / sizeof(T);
    if (off >= it->second || m > it->second - off) return nullptr;
    *offset = off;
    return stores_.at(it->first).get();
  }

  size_t kept() const { return active_.size(); }

  // The sum of size_of(store) over every store held, kept now or not (a dropped span's store
  // stays with its address).
  template <typename SizeOf>
  size_t held(SizeOf size_of) const {
    size_t n = 0;
    for (const auto& [a, s] : stores_) n += size_of(*s);
    return n;
  }

  // Stores of addresses not kept now, when there are more than kSpare stores beyond the most
  // spans kept at once; the caller frees them (after the device is done with them).
  std::vector<std::unique_ptr<Store>> take_unused() {
    std::vector<std::unique_ptr<Store>> out;
    if (stores_.size() <= peak_ + kSpare) return out;
    for (auto it = stores_.begin(); it != stores_.end();) {
      if (active_.count(it->first)) {
        ++it;
        continue;
      }
      out.push_back(std::move(it->second));
      it = stores_.erase(it);
    }
    return out;
  }

 private:
  static uintptr_t addr(const T* x) { return reinterpret_cast<uintptr_t>(x); }

  std::map<uintptr_t, size_t> active_;                   // first element -> elements kept
  std::map<uintptr_t, std::unique_ptr<Store>> stores_;  // first element -> its copy
  size_t peak_ = 0;                                     // most spans kept at once
};

}  // namespace lansbert
