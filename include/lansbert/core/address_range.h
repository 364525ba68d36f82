// AddressRange: reserved virtual addresses with no memory behind them and no access allowed
// (mmap PROT_NONE, MAP_NORESERVE). The model gives such addresses to activations that are only
// ever held as 16-bit GEMM-operand copies (Ops::kept_outputs_unwritten): their address keys
// the copy and nothing reads or writes the fp32 memory it would name. Reserving costs no
// memory, the range cannot overlap any allocation of this process (host or, under CUDA's
// unified addressing, device), and an access is a fault at once (SIGSEGV on the host, an
// illegal address on a device) rather than a silent read of stale values.
#pragma once

#include <cstddef>

namespace lansbert {

class AddressRange {
 public:
  AddressRange() = default;
  explicit AddressRange(size_t bytes);  // bytes == 0: an empty range (data() null)
  ~AddressRange();
  AddressRange(AddressRange&& o) noexcept;
  AddressRange& operator=(AddressRange&& o) noexcept;
  AddressRange(const AddressRange&) = delete;
  AddressRange& operator=(const AddressRange&) = delete;

  char* data() const { return base_; }
  size_t size() const { return bytes_; }

 private:
  char* base_ = nullptr;
  size_t bytes_ = 0;
};

}  // namespace lansbert
