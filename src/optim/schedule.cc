// The learning-rate schedules: validation, names, and the multiplier of each kind.
#include "lansbert/optim/schedule.h"

#include <cmath>
#include <cstdio>
#include <numbers>
#include <string>
#include <utility>

#include "lansbert/core/check.h"

namespace lansbert {
namespace {

// A step count, when given, overrides its ratio.
double fraction(double ratio, int64_t steps, int64_t total) {
  if (steps >= 0) return total > 0 ? static_cast<double>(steps) / static_cast<double>(total) : 0;
  return ratio;
}

}  // namespace

const char* schedule_kind_name(ScheduleKind k) {
  switch (k) {
    case ScheduleKind::kLans:
      return "lans";
    case ScheduleKind::kNvidiaPolyWarmup:
      return "nvidia_poly_warmup";
    case ScheduleKind::kLinear:
      return "linear";
    case ScheduleKind::kCosine:
      return "cosine";
    case ScheduleKind::kConstant:
      return "constant";
  }
  return "?";
}

const char* first_update_name(FirstUpdate f) {
  return f == FirstUpdate::kMult0 ? "mult0" : "mult1";
}

Status parse_schedule_kind(const std::string& s, ScheduleKind* out) {
  for (ScheduleKind k : {ScheduleKind::kLans, ScheduleKind::kNvidiaPolyWarmup, ScheduleKind::kLinear,
                         ScheduleKind::kCosine, ScheduleKind::kConstant}) {
    if (s == schedule_kind_name(k)) {
      *out = k;
      return Status::ok();
    }
  }
  return Status::invalid_argument("schedule.kind: unknown schedule '" + s +
                                  "' (expected lans, nvidia_poly_warmup, linear, cosine or constant)");
}

Status parse_first_update(const std::string& s, FirstUpdate* out) {
  if (s == "mult0") {
    *out = FirstUpdate::kMult0;
  } else if (s == "mult1") {
    *out = FirstUpdate::kMult1;
  } else {
    return Status::invalid_argument("schedule.first_update: expected mult0 or mult1, got '" + s +
                                    "'");
  }
  return Status::ok();
}

namespace {
// A ratio as the messages print it: 0.25, not 0.250000.
std::string ratio_text(double r) {
  char text[32];
  std::snprintf(text, sizeof text, "%g", r);
  return text;
}
}  // namespace

Status ScheduleConfig::validate() const {
  if (!(peak_lr >= 0) || !std::isfinite(peak_lr)) {
    return Status::invalid_argument("schedule.peak_lr must be finite and >= 0");
  }
  const std::string kind_name = schedule_kind_name(kind);
  // Keys the kind does not read are refused when set to anything but their default or a
  // "none" (0), rather than ignored while the user believes them applied.
  const ScheduleConfig defaults;
  const bool lans = kind == ScheduleKind::kLans, constant = kind == ScheduleKind::kConstant;
  if (!lans && (constant_steps > 0 || (constant_ratio != defaults.constant_ratio && constant_ratio != 0)))
    return Status::invalid_argument("schedule." + std::string(constant_steps > 0 ? "constant_steps" : "constant_ratio") +
                                    ": only kind lans has a constant phase (kind is " + kind_name + ")");
  const bool cosine = kind == ScheduleKind::kCosine;
  if (!lans && decay_power != defaults.decay_power)
    return Status::invalid_argument("schedule.decay_power: only kind lans takes a decay power (kind " + kind_name +
                                    (constant                      ? " does not decay"
                                     : kind == ScheduleKind::kLinear ? " decays linearly"
                                     : cosine                        ? " decays along a half cosine"
                                                                     : " decays with power 0.5") + ")");
  if (!cosine && min_ratio != 0)
    return Status::invalid_argument("schedule.min_ratio: only kind cosine decays to a floor (kind is " + kind_name +
                                    "; the others decay to 0)");
  if (!(min_ratio >= 0 && min_ratio < 1))
    return Status::invalid_argument("schedule.min_ratio " + ratio_text(min_ratio) +
                                    ": must be in [0, 1) (a fraction of optimizer.lr)");
  if (constant && (warmup_steps > 0 || (warmup_ratio != defaults.warmup_ratio && warmup_ratio != 0)))
    return Status::invalid_argument("schedule." + std::string(warmup_steps > 0 ? "warmup_steps" : "warmup_ratio") +
                                    ": kind constant has no warmup (kinds lans, linear, cosine and nvidia_poly_warmup have one)");
  for (const auto& [field, steps] : {std::pair{"warmup_steps", warmup_steps}, std::pair{"constant_steps", constant_steps}})
    if (steps < -1)
      return Status::invalid_argument("schedule." + std::string(field) + " " + std::to_string(steps) +
                                      ": must be at least 0 (or -1, the default: the ratio decides)");
  if (constant) return Status::ok();
  if (total_steps <= 0) {
    return Status::invalid_argument("schedule.total_steps must be > 0 for schedule '" + kind_name + "'");
  }
  const std::string T = std::to_string(total_steps);
  for (const auto& [field, steps] : {std::pair{"warmup_steps", warmup_steps}, std::pair{"constant_steps", constant_steps}})
    if (steps > total_steps)
      return Status::invalid_argument("schedule." + std::string(field) + " " + std::to_string(steps) +
                                      " exceeds schedule.total_steps " + T);
  const double w = fraction(warmup_ratio, warmup_steps, total_steps);
  const double c = lans ? fraction(constant_ratio, constant_steps, total_steps) : 0;
  if (!(w >= 0 && w <= 1))
    return Status::invalid_argument("schedule.warmup_ratio must be in [0, 1]");
  if (!(c >= 0 && c <= 1))
    return Status::invalid_argument("schedule.constant_ratio must be in [0, 1]");
  if (w + c > 1) {
    // Named at the key that was set (a step count), with both parts: the constant phase's
    // share is often the default 0.25 the user never wrote.
    const char* lead = warmup_steps >= 0     ? "warmup_steps"
                       : constant_steps >= 0 ? "constant_steps"
                       : warmup_ratio == defaults.warmup_ratio && constant_ratio != defaults.constant_ratio
                           ? "constant_ratio"
                           : "warmup_ratio";
    auto part = [&](const char* name, int64_t steps, double ratio) {
      return steps >= 0 ? "schedule." + std::string(name) + "_steps " + std::to_string(steps)
                        : "schedule." + std::string(name) + "_ratio " + ratio_text(ratio) + " (" +
                              std::to_string(int64_t(ratio * double(total_steps))) + " steps)";
    };
    return Status::invalid_argument("schedule." + std::string(lead) + ": the warmup (" +
                                    part("warmup", warmup_steps, warmup_ratio) + ") and the constant phase (" +
                                    part("constant", constant_steps, constant_ratio) +
                                    ") exceed schedule.total_steps " + T + " (a schedule without a constant phase: " +
                                    (constant_steps >= 0 ? "schedule.constant_steps: 0)" : "schedule.constant_ratio: 0)"));
  }
  if (!(decay_power > 0)) return Status::invalid_argument("schedule.decay_power must be > 0");
  return Status::ok();
}

LrSchedule::LrSchedule(const ScheduleConfig& config) : config_(config) {
  LB_CHECK_MSG(config.validate().is_ok(), config.validate().to_string());
  w_ = fraction(config.warmup_ratio, config.warmup_steps, config.total_steps);
  c_ = config.kind == ScheduleKind::kLans
           ? fraction(config.constant_ratio, config.constant_steps, config.total_steps)
           : 0;
}

double LrSchedule::multiplier(int64_t applied) const {
  if (config_.kind == ScheduleKind::kConstant) return 1.0;
  const int64_t q = applied + (config_.first_update == FirstUpdate::kMult1 ? 1 : 0);
  const double x = static_cast<double>(q) / static_cast<double>(config_.total_steps);
  // The phase is over (and avoids 0/0 when w + c = 1); cosine stays at its floor, as
  // Megatron-LM's min_lr does past the decay (mult1's last update is at x = 1).
  if (x >= 1) return config_.kind == ScheduleKind::kCosine ? config_.min_ratio : 0.0;
  if (x < w_) return x / w_;
  switch (config_.kind) {
    case ScheduleKind::kNvidiaPolyWarmup:
      return std::sqrt(1 - x);
    case ScheduleKind::kLinear:
      return (1 - x) / (1 - w_);
    case ScheduleKind::kCosine: {
      const double m = config_.min_ratio;
      return m + (1 - m) * 0.5 * (1 + std::cos(std::numbers::pi * (x - w_) / (1 - w_)));
    }
    case ScheduleKind::kLans:
      if (x < w_ + c_) return 1.0;
      return std::pow((1 - x) / (1 - w_ - c_), config_.decay_power);
    case ScheduleKind::kConstant:
      break;
  }
  return 1.0;
}

double sqrt_batch_scaled_lr(double lr0, int64_t base_batch, int64_t batch) {
  LB_CHECK(base_batch > 0 && batch > 0);
  return lr0 * std::sqrt(static_cast<double>(batch) / static_cast<double>(base_batch));
}

}  // namespace lansbert
