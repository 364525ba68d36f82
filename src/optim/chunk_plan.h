// ChunkPlan: the CPU multi-tensor launcher's work list. Every block of the parameter table is
// cut into chunks of a fixed number of elements (independent of the thread count); OpenMP
// hands out chunks, each chunk writes its partial sums to its own slot, and per-block sums
// add the slots in chunk order. Reductions are therefore bit-identical for any number of
// threads, and one parallel loop covers the 200 blocks of BERT whatever their sizes.
// Private to src/optim.
#pragma once

#include <cstddef>
#include <limits>
#include <memory>
#include <vector>

#include "lansbert/model/param_table.h"

namespace lansbert {

struct Chunk {
  size_t block;  // row of the table
  size_t begin;  // first element (absolute offset in the flat buffer)
  size_t end;    // one past the last element
};

class ChunkPlan {
 public:
  static constexpr size_t kChunkElements = 16384;

  // Chunks cover the part of each block inside [begin, end) (a sharded update's slice);
  // a block outside it has no chunks and sums to 0.
  explicit ChunkPlan(const ParamTable& table, size_t chunk_elements = kChunkElements,
                     size_t begin = 0, size_t end = std::numeric_limits<size_t>::max());
  // True iff this plan was built for a table with the same blocks and the same range.
  bool matches(const ParamTable& table, size_t begin = 0,
               size_t end = std::numeric_limits<size_t>::max()) const;

  const std::vector<Chunk>& chunks() const { return chunks_; }
  size_t blocks() const { return first_chunk_.size() - 1; }
  size_t first_chunk(size_t block) const { return first_chunk_[block]; }
  size_t end_chunk(size_t block) const { return first_chunk_[block + 1]; }

  // out[b*K + k] = sum over block b's chunks c, in order, of partial[c*K + k].
  void sum_by_block(const std::vector<double>& partial, int K, std::vector<double>* out) const;

 private:
  std::vector<Chunk> chunks_;
  std::vector<size_t> first_chunk_;  // blocks + 1 entries
  std::vector<size_t> offsets_;      // for matches()
  std::vector<size_t> numels_;
  size_t begin_ = 0, end_ = 0;
};

// Returns *cache, rebuilt first when it is empty or was built for another table or range.
const ChunkPlan& plan_for(const ParamTable& table, std::unique_ptr<ChunkPlan>* cache,
                          size_t begin = 0, size_t end = std::numeric_limits<size_t>::max());

// Sums of squares of a[0..n) and b[0..n) in double, in a fixed order (four interleaved
// accumulators, then combined), so the value depends only on the data. Inline so that a
// caller's stack tile does not escape (which would stop its loop from vectorising).
inline void sum_squares2(const float* a, const float* b, size_t n, double* sa, double* sb) {
  double a0 = 0, a1 = 0, a2 = 0, a3 = 0, b0 = 0, b1 = 0, b2 = 0, b3 = 0;
  size_t i = 0;
  for (; i + 4 <= n; i += 4) {
    const double x0 = a[i], x1 = a[i + 1], x2 = a[i + 2], x3 = a[i + 3];
    const double y0 = b[i], y1 = b[i + 1], y2 = b[i + 2], y3 = b[i + 3];
    a0 += x0 * x0;
    a1 += x1 * x1;
    a2 += x2 * x2;
    a3 += x3 * x3;
    b0 += y0 * y0;
    b1 += y1 * y1;
    b2 += y2 * y2;
    b3 += y3 * y3;
  }
  for (; i < n; ++i) {
    const double x = a[i], y = b[i];
    a0 += x * x;
    b0 += y * y;
  }
  *sa = (a0 + a1) + (a2 + a3);
  *sb = (b0 + b1) + (b2 + b3);
}

inline double sum_squares(const float* a, size_t n) {
  double a0 = 0, a1 = 0, a2 = 0, a3 = 0;
  size_t i = 0;
  for (; i + 4 <= n; i += 4) {
    const double x0 = a[i], x1 = a[i + 1], x2 = a[i + 2], x3 = a[i + 3];
    a0 += x0 * x0;
    a1 += x1 * x1;
    a2 += x2 * x2;
    a3 += x3 * x3;
  }
  for (; i < n; ++i) a0 += static_cast<double>(a[i]) * a[i];
  return (a0 + a1) + (a2 + a3);
}

}  // namespace lansbert
