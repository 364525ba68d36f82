// Learning-rate schedules of one pretraining phase, as pure functions of the number of
// updates already applied in the phase (s = 0 for the first update):
//   lans     warmup (linear) -> constant -> decay ((1-x)/(1-w-c))^power to 0 (LANS paper/code)
//   nvidia   NVIDIA's LAMB "poly warmup": x/w, then (1-x)^0.5 (jumps at the end of warmup)
//   linear   linear warmup then linear decay to 0 (lans with no constant phase, power 1)
//   cosine   linear warmup then a half cosine from 1 down to min_ratio (Megatron-LM's
//            --lr-decay-style cosine with --min-lr = min_ratio * lr; Hugging Face's
//            get_cosine_schedule_with_warmup when min_ratio is 0)
//   constant peak_lr throughout
// The first-update convention is explicit: with first_update = mult0 the update after s
// applied updates uses mult(s/T), so the first update gets mult(0) = 0 exactly as the LANS
// authors' code (scheduler stepped after the optimizer); mult1 uses mult((s+1)/T), NVIDIA's
// 1-based convention, whose last update gets lr 0 instead (cosine: its floor). docs/optimizers.md
// says more.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "lansbert/core/status.h"

namespace lansbert {

enum class ScheduleKind { kLans, kNvidiaPolyWarmup, kLinear, kCosine, kConstant };
enum class FirstUpdate {
  kMult0,  // update s (0-based) uses mult(s/T): the first update has lr 0 (LANS code)
  kMult1,  // update s uses mult((s+1)/T): the last update has lr 0 (NVIDIA; cosine: its floor)
};

struct ScheduleConfig {
  ScheduleKind kind = ScheduleKind::kLans;
  double peak_lr = 0.007;   // LANS paper, phase 1
  int64_t total_steps = 0;  // T: updates in this phase (> 0; a constant schedule ignores it, train does not)
  // Fractions of T; a step count >= 0 overrides its ratio.
  double warmup_ratio = 0.05;    // the LANS authors' later script: 5% warmup
  double constant_ratio = 0.25;  //   ... and a 25% constant phase (lans only)
  int64_t warmup_steps = -1;
  int64_t constant_steps = -1;
  double decay_power = 1.0;  // lans: 1 = linear decay
  double min_ratio = 0.0;    // cosine: the rate it decays to, as a fraction of peak_lr, in [0, 1)
  // Default mult0: reproduces the LANS authors' code, whose step counts the paper reports.
  FirstUpdate first_update = FirstUpdate::kMult0;

  // Names the offending field.
  Status validate() const;
};

// Parses "lans" | "nvidia_poly_warmup" | "linear" | "cosine" | "constant" and "mult0" | "mult1".
Status parse_schedule_kind(const std::string& s, ScheduleKind* out);
Status parse_first_update(const std::string& s, FirstUpdate* out);
const char* schedule_kind_name(ScheduleKind k);
const char* first_update_name(FirstUpdate f);

class LrSchedule {
 public:
  // REQUIRES: config.validate() is ok.
  explicit LrSchedule(const ScheduleConfig& config);
  const ScheduleConfig& config() const { return config_; }
  // The multiplier and the learning rate of the update that follows `applied` updates in
  // this phase. Past the phase's end the rate is 0 (constant: always 1; cosine: its floor).
  double multiplier(int64_t applied) const;
  double lr(int64_t applied) const { return config_.peak_lr * multiplier(applied); }

 private:
  ScheduleConfig config_;
  double w_ = 0;  // warmup fraction of T
  double c_ = 0;  // constant fraction of T
};

// Square-root scaling when the global batch changes from base_batch to batch:
// lr0 * sqrt(batch / base_batch).
double sqrt_batch_scaled_lr(double lr0, int64_t base_batch, int64_t batch);

}  // namespace lansbert
