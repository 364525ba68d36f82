// ChunkPlan construction and the fixed-order reductions the optimizers share.
#include "chunk_plan.h"

#include <algorithm>

#include "lansbert/core/check.h"

namespace lansbert {

ChunkPlan::ChunkPlan(const ParamTable& table, size_t chunk_elements) {
  LB_CHECK(chunk_elements > 0);
  first_chunk_.reserve(table.size() + 1);
  for (size_t b = 0; b < table.size(); ++b) {
    const ParamEntry& e = table[b];
    first_chunk_.push_back(chunks_.size());
    offsets_.push_back(e.offset);
    numels_.push_back(e.numel);
    for (size_t i = 0; i < e.numel; i += chunk_elements) {
      chunks_.push_back({b, e.offset + i, e.offset + std::min(e.numel, i + chunk_elements)});
    }
  }
  first_chunk_.push_back(chunks_.size());
}

bool ChunkPlan::matches(const ParamTable& table) const {
  if (table.size() != blocks()) return false;
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

const ChunkPlan& plan_for(const ParamTable& table, std::unique_ptr<ChunkPlan>* cache) {
  if (!*cache || !(*cache)->matches(table)) *cache = std::make_unique<ChunkPlan>(table);
  return **cache;
}

void sum_squares2(const float* a, const float* b, size_t n, double* sa, double* sb) {
  double a0 = 0, a1 = 0, a2 = 0, a3 = 0, b0 = 0, b1 = 0, b2 = 0, b3 = 0;
  size_t i = 0;
  for (; i + 4 <= n; i += 4) {
    const double x0 = a[i], x1 = a[i + 1], x2 = a[i + 2], x3 = a[i + 3];
    const double y0 = b[i], y1 = b[i + 1], y2 = b[i + 2], y3 = b[i + 3];
    a0 += x0 * x0; a1 += x1 * x1; a2 += x2 * x2; a3 += x3 * x3;
    b0 += y0 * y0; b1 += y1 * y1; b2 += y2 * y2; b3 += y3 * y3;
  }
  for (; i < n; ++i) {
    const double x = a[i], y = b[i];
    a0 += x * x;
    b0 += y * y;
  }
  *sa = (a0 + a1) + (a2 + a3);
  *sb = (b0 + b1) + (b2 + b3);
}

double sum_squares(const float* a, size_t n) {
  double a0 = 0, a1 = 0, a2 = 0, a3 = 0;
  size_t i = 0;
  for (; i + 4 <= n; i += 4) {
    const double x0 = a[i], x1 = a[i + 1], x2 = a[i + 2], x3 = a[i + 3];
    a0 += x0 * x0; a1 += x1 * x1; a2 += x2 * x2; a3 += x3 * x3;
  }
  for (; i < n; ++i) a0 += static_cast<double>(a[i]) * a[i];
  return (a0 + a1) + (a2 + a3);
}

}  // namespace lansbert
