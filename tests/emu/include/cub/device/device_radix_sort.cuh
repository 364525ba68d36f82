// The emulator's stand-in for CUB's DeviceRadixSort::SortPairs (the one CUB call lansbert
// makes): a stable sort of (key, value) pairs by the key bits [begin_bit, end_bit), with
// CUB's two-phase protocol (a null temp_storage asks for its size). Keys are compared as
// unsigned bit fields, as a radix sort does. The sort is queued on the stream (emu_streams.h).
#pragma once

#include <cuda_runtime.h>

#include <algorithm>
#include <cstddef>
#include <numeric>
#include <type_traits>
#include <vector>

#include "emu_streams.h"

namespace cub {

struct DeviceRadixSort {
  template <typename Key, typename Value, typename NumItems>
  static cudaError_t SortPairs(void* temp_storage, size_t& temp_bytes, const Key* keys_in, Key* keys_out,
                               const Value* values_in, Value* values_out, NumItems num_items, int begin_bit = 0,
                               int end_bit = sizeof(Key) * 8, cudaStream_t stream = nullptr) {
    if (!temp_storage) {
      temp_bytes = 1;  // CUB always wants some storage
      return cudaSuccess;
    }
    // Queued on the stream like the real sort: the keys may come from work not yet run.
    emu::enqueue(stream, [=] {
      using Bits = std::make_unsigned_t<Key>;
      const int width = end_bit - begin_bit;
      const Bits mask = width >= int(sizeof(Bits) * 8) ? Bits(~Bits(0)) : Bits((Bits(1) << width) - 1);
      auto field = [&](Key k) { return Bits(Bits(k) >> begin_bit) & mask; };
      std::vector<size_t> order(static_cast<size_t>(num_items));
      std::iota(order.begin(), order.end(), size_t(0));
      std::stable_sort(order.begin(), order.end(),
                       [&](size_t a, size_t b) { return field(keys_in[a]) < field(keys_in[b]); });
      std::vector<Key> k(order.size());
      std::vector<Value> v(order.size());
      for (size_t i = 0; i < order.size(); ++i) k[i] = keys_in[order[i]], v[i] = values_in[order[i]];
      std::copy(k.begin(), k.end(), keys_out);
      std::copy(v.begin(), v.end(), values_out);
    });
    return cudaSuccess;
  }
};

}  // namespace cub
