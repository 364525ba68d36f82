// LossScaler: the unscale-and-check pass over the chunk plan, the dynamic scale's
// backoff/growth/hysteresis rules, and the error raised when skipping cannot fix overflow.
#include "lansbert/optim/loss_scaler.h"

#include <algorithm>
#include <cmath>

#include "chunk_passes.h"
#include "lansbert/core/check.h"
#include "lansbert/kernels/optim_math.h"

namespace lansbert {

const char* loss_scale_mode_name(LossScaleMode m) {
  switch (m) {
    case LossScaleMode::kNone:
      return "none";
    case LossScaleMode::kStatic:
      return "static";
    case LossScaleMode::kDynamic:
      return "dynamic";
  }
  return "?";
}

Status parse_loss_scale_mode(const std::string& s, LossScaleMode* out) {
  for (LossScaleMode m : {LossScaleMode::kNone, LossScaleMode::kStatic, LossScaleMode::kDynamic}) {
    if (s == loss_scale_mode_name(m)) {
      *out = m;
      return Status::ok();
    }
  }
  return Status::invalid_argument("loss_scale.mode: expected none, static or dynamic, got '" + s +
                                  "'");
}

Status LossScalerConfig::validate() const {
  if (!(initial_scale > 0) || !std::isfinite(initial_scale)) {
    return Status::invalid_argument("loss_scale.initial_scale must be finite and > 0");
  }
  // 0 would act as 1 (the first skipped update ends the run): say what is meant.
  if (max_consecutive_skips < 1) return Status::invalid_argument("loss_scale.max_consecutive_skips must be >= 1");
  if (mode != LossScaleMode::kDynamic) return Status::ok();
  if (growth_interval < 1)
    return Status::invalid_argument("loss_scale.growth_interval must be >= 1");
  if (!(growth_factor > 1)) return Status::invalid_argument("loss_scale.growth_factor must be > 1");
  if (!(backoff_factor > 0 && backoff_factor < 1)) {
    return Status::invalid_argument("loss_scale.backoff_factor must be in (0, 1)");
  }
  if (!(min_scale > 0) || min_scale > initial_scale) {
    return Status::invalid_argument("loss_scale.min_scale must be in (0, initial_scale]");
  }
  if (hysteresis < 1) return Status::invalid_argument("loss_scale.hysteresis must be >= 1");
  return Status::ok();
}

LossScaler::LossScaler(const LossScalerConfig& config) : config_(config) {
  LB_CHECK_MSG(config.validate().is_ok(), config.validate().to_string());
  state_.scale = config.mode == LossScaleMode::kNone ? 1.0 : config.initial_scale;
  state_.growth_tracker = 0;
  state_.hysteresis_left = config.hysteresis;
}

LossScaler::~LossScaler() = default;

GradCheck LossScaler::unscale_and_check(const ParamTable& table, float* grads, size_t begin,
                                        size_t end) {
  const ChunkPlan& plan = plan_for(table, &plan_, begin, end);
  const bool unscale_shared = state_.scale != 1.0;
  const float inv_shared = static_cast<float>(1.0 / state_.scale);
  chunk_bad_.assign(plan.chunks().size(), 0);
  for_each_chunk(plan, [&](size_t i, const Chunk& ch) {
    // Locals, not reads through the closure, so the element loop vectorises.
    const bool unscale = unscale_shared;
    const float inv = inv_shared;
    float* __restrict g = grads;
    size_t bad = 0;
    for (size_t j = ch.begin; j < ch.end; ++j) {
      // Unscale first, then check: a finite value can overflow when the scale is below 1.
      if (unscale) g[j] *= inv;
      bad += optim_is_finite(g[j]) ? 0 : 1;
    }
    chunk_bad_[i] = bad;
  });
  GradCheck check;
  for (size_t b = 0; b < plan.blocks(); ++b) {
    size_t bad = 0;
    for (size_t c = plan.first_chunk(b); c < plan.end_chunk(b); ++c) bad += chunk_bad_[c];
    if (bad) check.nonfinite_blocks.push_back(b);
    check.nonfinite_values += bad;
  }
  check.finite = check.nonfinite_values == 0;
  return check;
}

void LossScaler::on_finite() {
  if (config_.mode != LossScaleMode::kDynamic) return;
  if (++state_.growth_tracker >= config_.growth_interval) {
    state_.scale *= config_.growth_factor;
    state_.growth_tracker = 0;
    state_.hysteresis_left = config_.hysteresis;
  }
}

Status LossScaler::on_overflow(const ParamTable& table, const GradCheck& check,
                               int64_t consecutive_skips) {
  if (config_.mode != LossScaleMode::kDynamic) {
    if (consecutive_skips >= config_.max_consecutive_skips) {
      const std::string scaling = config_.mode == LossScaleMode::kNone
                                      ? "without loss scaling"
                                      : "with the static loss scale " + std::to_string(state_.scale);
      return floor_error(table, check, consecutive_skips,
                         "gradients were not finite " + scaling + " for " +
                             std::to_string(consecutive_skips) + " steps in a row");
    }
    return Status::ok();
  }
  state_.growth_tracker = 0;
  state_.hysteresis_left = std::max<int64_t>(state_.hysteresis_left - 1, 0);
  if (state_.hysteresis_left > 0) return Status::ok();
  if (state_.scale <= config_.min_scale) {
    return floor_error(table, check, consecutive_skips,
                       "loss scale is at its floor " + std::to_string(config_.min_scale) +
                           " and gradients still overflow");
  }
  state_.scale = std::max(state_.scale * config_.backoff_factor, config_.min_scale);
  return Status::ok();
}

Status LossScaler::floor_error(const ParamTable& table, const GradCheck& check, int64_t skips,
                               const std::string& why) const {
  std::string blocks;
  const size_t shown = std::min<size_t>(check.nonfinite_blocks.size(), 8);
  for (size_t i = 0; i < shown; ++i) {
    if (i) blocks += ", ";
    blocks += table[check.nonfinite_blocks[i]].name;
  }
  if (check.nonfinite_blocks.size() > shown) {
    blocks += ", ... (" + std::to_string(check.nonfinite_blocks.size()) + " blocks in all)";
  }
  return Status::diverged(why + " (" + std::to_string(skips) + " consecutive skipped steps; " +
                          std::to_string(check.nonfinite_values) +
                          " non-finite gradient values in: " + blocks +
                          "). The loss or the gradients diverged; lower the learning rate or "
                          "check the data");
}

}  // namespace lansbert
