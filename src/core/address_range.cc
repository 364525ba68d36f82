// AddressRange (address_range.h): mmap(PROT_NONE) reservations.
#include "lansbert/core/address_range.h"

#include <sys/mman.h>

#include <cerrno>
#include <cstring>
#include <string>
#include <utility>

#include "lansbert/core/check.h"

namespace lansbert {

AddressRange::AddressRange(size_t bytes) : bytes_(bytes) {
  if (bytes == 0) return;
  void* p = mmap(nullptr, bytes, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  LB_CHECK_MSG(p != MAP_FAILED,
               "reserving " + std::to_string(bytes) + " bytes of address space failed: " + std::strerror(errno));
  base_ = static_cast<char*>(p);
}

AddressRange::~AddressRange() {
  if (base_) munmap(base_, bytes_);
}

AddressRange::AddressRange(AddressRange&& o) noexcept
    : base_(std::exchange(o.base_, nullptr)), bytes_(std::exchange(o.bytes_, 0)) {}

AddressRange& AddressRange::operator=(AddressRange&& o) noexcept {
  if (this != &o) {
    if (base_) munmap(base_, bytes_);
    base_ = std::exchange(o.base_, nullptr);
    bytes_ = std::exchange(o.bytes_, 0);
  }
  return *this;
}

}  // namespace lansbert
