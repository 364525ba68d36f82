// estimate_noise_scale and gradient_sum_squares (noise_scale.h).
#include "lansbert/optim/noise_scale.h"

#include <cmath>
#include <memory>
#include <vector>

#include "chunk_passes.h"
#include "chunk_plan.h"
#include "lansbert/core/check.h"

namespace lansbert {

NoiseScaleEstimate estimate_noise_scale(double small_sq, double big_sq, double b, double B) {
  LB_CHECK(b > 0 && b < B);
  NoiseScaleEstimate e;
  e.grad_sq = (B * big_sq - b * small_sq) / (B - b);
  e.trace = (small_sq - big_sq) / (1 / b - 1 / B);
  e.scale = e.grad_sq > 0 ? e.trace / e.grad_sq : std::nan("");
  return e;
}

double gradient_sum_squares(const ParamTable& table, const float* grads) {
  // One plan per thread of the caller: the trainer calls this once per update, on one table.
  thread_local std::unique_ptr<ChunkPlan> cache;
  const ChunkPlan& plan = plan_for(table, &cache);
  std::vector<double> partial(plan.chunks().size(), 0.0);
  for_each_chunk(plan, [&](size_t i, const Chunk& ch) { partial[i] = sum_squares(grads + ch.begin, ch.end - ch.begin); });
  double s = 0;
  for (double p : partial) s += p;
  return s;
}

}  // namespace lansbert
