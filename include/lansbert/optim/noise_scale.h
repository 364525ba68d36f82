// The gradient noise scale of McCandlish, Kaplan, Amodei et al. (2018, "An Empirical Model of
// Large-Batch Training", section 2.2 and appendix A): B_simple = tr(Σ) / |G|², the batch size
// at which the gradient's noise and its signal are about equal. Batches well below it train
// nearly as fast per sample as any; batches well above it spend samples for little more
// progress per step. A large-batch recipe (LANS at 96K) is judged against it.
//
// With the mean gradient of a batch of b samples G_b, E|G_b|² = |G|² + tr(Σ)/b. Two batch
// sizes b < B give unbiased estimates of both terms:
//   |G|²  ≈ (B |G_B|² − b |G_b|²) / (B − b),    tr(Σ) ≈ (|G_b|² − |G_B|²) / (1/b − 1/B).
// lansbert measures |G_b|² on the first micro-batch of each update (b = batch.micro_batch, the
// mean over ranks) and |G_B|² on the whole update (B = batch.global_batch): the global
// gradient norm the optimizer computes anyway. Each estimate is noisy; the two are averaged
// over recent updates (moving averages, logging.noise_scale_updates) before their ratio is
// taken, as the paper advises.
#pragma once

#include <cstddef>

#include "lansbert/model/param_table.h"

namespace lansbert {

struct NoiseScaleEstimate {
  double grad_sq = 0;  // |G|²
  double trace = 0;    // tr(Σ), per sample
  double scale = 0;    // trace / grad_sq; NaN when grad_sq <= 0 (the noise swamps the signal)
};

// From small_sq and big_sq, the means of |G_b|² and |G_B|² over the same steps.
// REQUIRES: 0 < b < B.
NoiseScaleEstimate estimate_noise_scale(double small_sq, double big_sq, double b, double B);

// The sum of g² over every element of `grads` (host memory laid out by `table`), in double,
// chunk by chunk in parallel and the chunks added in order (the same sum on every call).
double gradient_sum_squares(const ParamTable& table, const float* grads);

}  // namespace lansbert
