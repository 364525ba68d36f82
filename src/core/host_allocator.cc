// The host allocator: 256-byte aligned malloc, memcpy and memset.
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <string>

#include "lansbert/core/allocator.h"
#include "lansbert/core/check.h"

namespace lansbert {

namespace {
class HostAllocator final : public Allocator {
 public:
  void* allocate(size_t bytes) override {
    const size_t rounded = (bytes + 255) / 256 * 256;
    void* p = std::aligned_alloc(256, rounded ? rounded : 256);
    // Not a program bug: the model, batch or data need more memory than this process may use.
    // Exit 5, "out of memory", as a failed allocation anywhere else (check.h).
    if (p == nullptr)
      abort_job("out of memory: a host allocation of " + std::to_string(bytes) + " bytes failed (the model, batch or "
                "data need more than this process may use: a batch system's memory limit, ulimit -v; a smaller "
                "micro-batch needs less)", 5);
    return p;
  }
  void deallocate(void* p) override { std::free(p); }
  void copy_from_host(void* dst, const void* src, size_t bytes) override { std::memcpy(dst, src, bytes); }
  void copy_to_host(void* dst, const void* src, size_t bytes) override { std::memcpy(dst, src, bytes); }
  void copy_device(void* dst, const void* src, size_t bytes) override { std::memcpy(dst, src, bytes); }
  void set_zero(void* p, size_t bytes) override { std::memset(p, 0, bytes); }
};
}  // namespace

Allocator& host_allocator() {
  static HostAllocator a;
  return a;
}

double host_memory_bytes() { return double(::sysconf(_SC_PHYS_PAGES)) * double(::sysconf(_SC_PAGE_SIZE)); }

}  // namespace lansbert
