// The chunk plan of the device's multi-tensor passes (the optimizer in cuda_optim.cu, the
// loss scaler's check in cuda_mixed.cu): the part of each table block inside a range
// [begin, end) (a sharded update's slice; everything unsharded) cut into chunks of
// kDeviceChunk elements, one CUDA block each, as the CPU's ChunkPlan cuts them. Host code;
// the chunks are copied to the device by the user.
#pragma once

#include <algorithm>
#include <cstddef>
#include <vector>

#include "lansbert/model/param_table.h"

namespace lansbert::cuda {

constexpr size_t kDeviceChunk = 16384;  // elements per CUDA block, as the CPU chunk plan

struct DevChunk {
  int block;          // row of the table
  size_t begin, end;  // flat-buffer elements
  size_t state;       // begin - range begin: index of `begin` in slice-sized buffers (m, v)
};

// The table and range a plan was cut for, to tell whether a call can reuse it.
class DeviceChunkPlan {
 public:
  bool matches(const ParamTable& table, size_t begin, size_t end) const {
    if (!cut_ || table.size() != offsets_.size() || begin != begin_ || end != end_) return false;
    for (size_t b = 0; b < table.size(); ++b)
      if (table[b].offset != offsets_[b] || table[b].numel != numels_[b]) return false;
    return true;
  }
  // Cuts the plan: *chunks in table order, and (when first is given) first[b] = the index of
  // block b's first chunk, with first[blocks] = the chunk count.
  void cut(const ParamTable& table, size_t begin, size_t end, std::vector<DevChunk>* chunks,
           std::vector<int>* first = nullptr) {
    chunks->clear();
    if (first) first->clear();
    offsets_.clear();
    numels_.clear();
    for (size_t b = 0; b < table.size(); ++b) {
      const ParamEntry& e = table[b];
      if (first) first->push_back(static_cast<int>(chunks->size()));
      offsets_.push_back(e.offset);
      numels_.push_back(e.numel);
      const size_t lo = std::max(e.offset, begin), hi = std::min(e.offset + e.numel, end);
      for (size_t i = lo; i < hi; i += kDeviceChunk)
        chunks->push_back({static_cast<int>(b), i, std::min(hi, i + kDeviceChunk), i - begin});
    }
    if (first) first->push_back(static_cast<int>(chunks->size()));
    begin_ = begin;
    end_ = end;
    cut_ = true;
  }

 private:
  bool cut_ = false;
  std::vector<size_t> offsets_, numels_;
  size_t begin_ = 0, end_ = 0;
};

}  // namespace lansbert::cuda
