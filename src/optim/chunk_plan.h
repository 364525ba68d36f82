// ChunkPlan: the CPU multi-tensor launcher's work list. Every block of the parameter table is
// cut into chunks of a fixed number of elements (independent of the thread count); OpenMP
// hands out chunks, each chunk writes its partial sums to its own slot, and per-block sums
// add the slots in chunk order. Reductions are therefore bit-identical for any number of
// threads, and one parallel loop covers the 200 blocks of BERT whatever their sizes.
// Private to src/optim.
#pragma once

#include <cstddef>
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

  explicit ChunkPlan(const ParamTable& table, size_t chunk_elements = kChunkElements);
  // True iff this plan was built for a table with the same blocks.
  bool matches(const ParamTable& table) const;

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
};

// Returns *cache, rebuilt first when it is empty or was built for another table.
const ChunkPlan& plan_for(const ParamTable& table, std::unique_ptr<ChunkPlan>* cache);

// Sums of squares of a[0..n) and b[0..n) in double, in a fixed order (four interleaved
// accumulators, then combined), so the value depends only on the data.
void sum_squares2(const float* a, const float* b, size_t n, double* sa, double* sb);
double sum_squares(const float* a, size_t n);

}  // namespace lansbert
