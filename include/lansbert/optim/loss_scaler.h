// LossScaler: the fp16 loss scale and the inf/NaN gate in front of every update.
// The trainer multiplies the loss by scale() before backward; before the optimizer sees the
// gradients, unscale_and_check multiplies them by 1/scale (so LANS's eps and LAMB's clipping
// see true values) and counts non-finite values per block in the same pass. A non-finite
// gradient means the update is skipped (the Updater leaves parameters, moments, t and the
// schedule alone) and on_overflow lowers the scale.
//
// Modes: dynamic (fp16: backoff on overflow, growth after growth_interval clean steps,
// Megatron-LM hysteresis), static (a fixed scale), none (bf16/fp32: scale 1, the finiteness
// check still guards the update). When the scale cannot go lower (dynamic at min_scale) or
// max_consecutive_skips is reached (static/none), on_overflow returns an error naming the
// consecutive skips and the blocks that held non-finite values.
#pragma once

#include <cstddef>
#include <cstdint>
#include <limits>
#include <memory>
#include <string>
#include <vector>

#include "lansbert/core/status.h"
#include "lansbert/model/param_table.h"

namespace lansbert {

enum class LossScaleMode { kNone, kStatic, kDynamic };

struct LossScalerConfig {
  LossScaleMode mode = LossScaleMode::kNone;  // the config layer picks dynamic for fp16
  double initial_scale = 65536.0;             // 2^16, as PyTorch GradScaler and apex
  int64_t growth_interval = 2000;             // clean steps before the scale grows
  double growth_factor = 2.0;
  double backoff_factor = 0.5;
  double min_scale = 1.0;  // the floor; an overflow at the floor is an error
  // Overflows tolerated before the first backoff after each growth (Megatron-LM; 1 = back off
  // on every overflow, as PyTorch).
  int64_t hysteresis = 2;
  // static/none: an error after this many consecutive skipped steps.
  int64_t max_consecutive_skips = 10;

  Status validate() const;
};

Status parse_loss_scale_mode(const std::string& s, LossScaleMode* out);
const char* loss_scale_mode_name(LossScaleMode m);

// Everything a checkpoint must restore for the next step to match.
struct LossScalerState {
  double scale = 1.0;
  int64_t growth_tracker = 0;   // clean steps since the last change of scale or overflow
  int64_t hysteresis_left = 1;  // overflows still tolerated before a backoff
};

struct GradCheck {
  bool finite = true;
  size_t nonfinite_values = 0;
  std::vector<size_t> nonfinite_blocks;  // table rows, ascending
};

class ChunkPlan;

class LossScaler {
 public:
  // REQUIRES: config.validate() is ok.
  explicit LossScaler(const LossScalerConfig& config);
  ~LossScaler();
  LossScaler(const LossScaler&) = delete;
  LossScaler& operator=(const LossScaler&) = delete;

  const LossScalerConfig& config() const { return config_; }
  // What the loss is multiplied by before backward (1 in none mode).
  double scale() const { return state_.scale; }
  const LossScalerState& state() const { return state_; }
  void set_state(const LossScalerState& s) { state_ = s; }

  // Multiplies every gradient by 1/scale() and checks each for inf/NaN, in one pass; with a
  // range, only the elements in [begin, end) (a sharded update's slice: the rest of the
  // buffer is not this rank's, and reading it would cost a full pass per rank).
  GradCheck unscale_and_check(const ParamTable& table, float* grads, size_t begin = 0,
                              size_t end = std::numeric_limits<size_t>::max());
  // After an applied update: counts towards growth.
  void on_finite();
  // After a skipped update (consecutive_skips includes this one). Lowers the scale when due;
  // returns an error when the scale cannot go lower or too many steps were skipped in a row.
  Status on_overflow(const ParamTable& table, const GradCheck& check, int64_t consecutive_skips);

 private:
  Status floor_error(const ParamTable& table, const GradCheck& check, int64_t skips,
                     const std::string& why) const;

  LossScalerConfig config_;
  LossScalerState state_;
  std::unique_ptr<ChunkPlan> plan_;
  std::vector<size_t> chunk_bad_;
};

}  // namespace lansbert
