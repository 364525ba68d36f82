// ChunkPlan construction and the fixed-order reductions the optimizers share.
#include "chunk_plan.h"

#include <algorithm>

#include "lansbert/core/check.h"

namespace lansbert {

ChunkPlan::ChunkPlan(const ParamTable& table, size_t chunk_elements, size_t begin, size_t end)
    : begin_(begin), end_(end) {
  LB_CHECK(chunk_elements > 0);
  LB_CHECK(begin <= end);
  first_chunk_.reserve(table.size() + 1);
  for (size_t b = 0; b < table.size(); ++b) {
    const ParamEntry& e = table[b];
    first_chunk_.push_back(chunks_.size());
    offsets_.push_back(e.offset);
    numels_.push_back(e.numel);
    const size_t lo = std::max(e.offset, begin), hi = std::min(e.offset + e.numel, end);
    for (size_t i = lo; i < hi; i += chunk_elements) {
      chunks_.push_back({b, i, std::min(hi, i + chunk_elements)});
    }
  }
  first_chunk_.push_back(chunks_.size());
}

bool ChunkPlan::matches(const ParamTable& table, size_t begin, size_t end) const {
  if (table.size() != blocks() || begin != begin_ || end != end_) return false;
  for (size_t b = 0; b < table.size(); ++b) {
    if (table[b].offset != offsets_[b] || table[b].numel != numels_[b]) return false;
  }
  return true;
}

void ChunkPlan::sum_by_block(const std::vector<double>& partial, int K,
                             std::vector<double>* out) const {
  LB_CHECK(partial.size() == chunks_.size() * static_cast<size_t>(K));
  out->assign(blocks() * K, 0.0);
  for (size_t b = 0; b < blocks(); ++b) {
    for (size_t c = first_chunk(b); c < end_chunk(b); ++c) {
      for (int k = 0; k < K; ++k) (*out)[b * K + k] += partial[c * K + k];
    }
  }
}

const ChunkPlan& plan_for(const ParamTable& table, std::unique_ptr<ChunkPlan>* cache,
                          size_t begin, size_t end) {
  if (!*cache || !(*cache)->matches(table, begin, end)) {
    *cache = std::make_unique<ChunkPlan>(table, ChunkPlan::kChunkElements, begin, end);
  }
  return **cache;
}

}  // namespace lansbert
