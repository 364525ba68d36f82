// CRC32C (Castagnoli), the checksum our shard files carry on their header and on every
// record, a checkpoint's trainer.json on each of its files, an optimizer state file on its
// contents, and TensorBoard's record framing. Chosen over xxhash because SSE4.2 computes it
// in hardware at several GB/s, so checking each record as it is read costs less than copying
// it; a table-driven fallback gives identical values on CPUs without it.
#pragma once

#include <cstddef>
#include <cstdint>

namespace lansbert {

// Returns the CRC32C of `n` bytes at `data`, continuing from `crc` (0 to start).
uint32_t crc32c(const void* data, size_t n, uint32_t crc = 0);

}  // namespace lansbert
