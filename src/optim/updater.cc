// Updater: the order of one update (unscale, check, skip or apply, count) and phase starts.
#include "lansbert/optim/updater.h"

#include <algorithm>
#include <cmath>
#include <utility>

namespace lansbert {

const char* phase_start_name(PhaseStart p) {
  return p == PhaseStart::kReset ? "reset" : "keep_moments";
}

Status parse_phase_start(const std::string& s, PhaseStart* out) {
  if (s == "keep_moments") {
    *out = PhaseStart::kKeepMoments;
  } else if (s == "reset") {
    *out = PhaseStart::kReset;
  } else {
    return Status::invalid_argument("phase_start: expected keep_moments or reset, got '" + s + "'");
  }
  return Status::ok();
}

Status Updater::create(const UpdaterConfig& config, std::unique_ptr<Updater>* out) {
  LB_RETURN_IF_ERROR(config.schedule.validate());
  LB_RETURN_IF_ERROR(config.loss_scale.validate());
  std::unique_ptr<Optimizer> opt;
  LB_RETURN_IF_ERROR(make_optimizer(config.optimizer.name, config.optimizer, &opt));
  out->reset(new Updater(config, std::move(opt)));
  return Status::ok();
}

Status Updater::create(const UpdaterConfig& config, std::unique_ptr<Optimizer> optimizer,
                       UpdaterDeviceHooks hooks, std::unique_ptr<Updater>* out) {
  LB_RETURN_IF_ERROR(config.schedule.validate());
  LB_RETURN_IF_ERROR(config.loss_scale.validate());
  if (!optimizer || !hooks.unscale_and_check || !hooks.zero)
    return Status::invalid_argument("Updater: a device updater needs an optimizer and both hooks");
  if (optimizer->name() != config.optimizer.name)
    return Status::invalid_argument("Updater: optimizer '" + optimizer->name() + "' given for config '" +
                                    config.optimizer.name + "'");
  out->reset(new Updater(config, std::move(optimizer)));
  (*out)->device_ = std::move(hooks);
  return Status::ok();
}

Updater::Updater(const UpdaterConfig& config, std::unique_ptr<Optimizer> opt)
    : config_(config),
      optimizer_(std::move(opt)),
      schedule_(config.schedule),
      scaler_(config.loss_scale) {
  counters_.optimizer = optimizer_->name();
}

Status Updater::step(const ParamTable& table, const FlatBuffers& buf, StepReport* report) {
  StepReport r;
  r.loss_scale = scaler_.scale();
  r.check = device_.unscale_and_check
                ? device_.unscale_and_check(table, buf.grads, scaler_.scale(), shard_.begin, shard_.end)
                : scaler_.unscale_and_check(table, buf.grads, shard_.begin, shard_.end);
  if (shard_.sharded()) {  // one verdict for all ranks; the blocks listed stay this rank's
    double bad = static_cast<double>(r.check.nonfinite_values);
    shard_.reduce_sums(&bad, 1);
    r.check.nonfinite_values = static_cast<size_t>(bad);
    r.check.finite = bad == 0;
  }
  if (!r.check.finite) {
    // Nothing of the optimizer's state moves: not p, m, v, t, nor the schedule position.
    r.skipped = true;
    ++counters_.skipped_steps;
    ++counters_.consecutive_skips;
    Status s = scaler_.on_overflow(table, r.check, counters_.consecutive_skips);
    if (report) *report = std::move(r);
    return s;
  }
  r.lr = schedule_.lr(counters_.schedule_step);
  optimizer_->update(table, buf, counters_.step + 1, r.lr, &r.stats);
  ++counters_.step;
  ++counters_.schedule_step;
  counters_.consecutive_skips = 0;
  scaler_.on_finite();
  if (report) *report = std::move(r);
  return Status::ok();
}

Status Updater::begin_phase(const ScheduleConfig& schedule, const FlatBuffers& buf,
                            size_t elements) {
  LB_RETURN_IF_ERROR(schedule.validate());
  config_.schedule = schedule;
  schedule_ = LrSchedule(schedule);
  counters_.schedule_step = 0;
  counters_.consecutive_skips = 0;
  ++counters_.phase;
  counters_.phase_start = phase_start_name(config_.phase_start);
  if (config_.phase_start == PhaseStart::kReset) {
    if (device_.zero) {
      device_.zero(buf.m, elements);
      device_.zero(buf.v, elements);
    } else {
      std::fill(buf.m, buf.m + elements, 0.0f);
      std::fill(buf.v, buf.v + elements, 0.0f);
    }
    counters_.step = 0;
  }
  return Status::ok();
}

OptimizerState Updater::state() const {
  OptimizerState s = counters_;
  s.scaler = scaler_.state();
  return s;
}

Status Updater::set_state(const OptimizerState& s, std::string_view other_rule_hint) {
  if (s.optimizer != optimizer_->name()) {
    std::string msg = "the checkpoint's run used optimizer.name " + s.optimizer + ", this run uses " +
                      std::string(optimizer_->name());
    if (!other_rule_hint.empty()) msg += ": " + std::string(other_rule_hint);
    return Status::invalid_argument(msg);
  }
  // Named field by field: a hand-edited or damaged state would otherwise train on with a
  // wrong bias correction, schedule position or loss scale.
  const std::pair<const char*, int64_t> counts[] = {
      {"step", s.step},
      {"schedule_step", s.schedule_step},
      {"skipped_steps", s.skipped_steps},
      {"consecutive_skips", s.consecutive_skips},
      {"phase", s.phase},
      {"scaler_growth_tracker", s.scaler.growth_tracker},
      {"scaler_hysteresis_left", s.scaler.hysteresis_left}};
  for (const auto& [field, value] : counts)
    if (value < 0) return Status::corrupt("optimizer state: " + std::string(field) + " " + std::to_string(value) + " is negative");
  if (!(s.scaler.scale > 0) || !std::isfinite(s.scaler.scale))
    return Status::corrupt("optimizer state: loss_scale " + std::to_string(s.scaler.scale) +
                           " is not a positive finite number");
  if (s.consecutive_skips > s.skipped_steps)
    return Status::corrupt("optimizer state: consecutive_skips " + std::to_string(s.consecutive_skips) +
                           " exceeds skipped_steps " + std::to_string(s.skipped_steps));
  counters_ = s;
  scaler_.set_state(s.scaler);
  return Status::ok();
}

}  // namespace lansbert
