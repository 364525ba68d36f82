// Allocator: where buffers come from. The host allocator lives here; the CUDA backend
// provides a device allocator (cudaMalloc, never managed memory) with the same interface,
// so buffers, arenas and the model are written once for both devices.
#pragma once

#include <cstddef>

namespace lansbert {

class Allocator {
 public:
  virtual ~Allocator() = default;
  // Returns memory aligned to at least 256 bytes, or ends the job (out of memory is fatal: the
  // host allocator's is exit 5, check.h's abort_job).
  virtual void* allocate(size_t bytes) = 0;
  virtual void deallocate(void* p) = 0;
  // Copies between this allocator's memory and host memory, and within device memory.
  virtual void copy_from_host(void* dst, const void* src, size_t bytes) = 0;
  virtual void copy_to_host(void* dst, const void* src, size_t bytes) = 0;
  virtual void copy_device(void* dst, const void* src, size_t bytes) = 0;
  virtual void set_zero(void* p, size_t bytes) = 0;
};

// Returns the process-wide host allocator (aligned malloc).
Allocator& host_allocator();
// This host's physical memory in bytes (sysconf): what plans and --batch checks on the CPU
// are measured against before anything is allocated.
double host_memory_bytes();

}  // namespace lansbert
