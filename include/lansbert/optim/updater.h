// Updater: one call per global batch that turns gradients into a parameter update. It owns
// the update rule (LANS/LAMB/AdamW), the phase's learning-rate schedule, the loss scaler and
// the counters, and enforces their order: unscale and check the gradients; on inf/NaN skip
// (parameters, moments, t and the schedule position stay as they are; the skip is counted;
// the scale backs off); otherwise take lr from the schedule at the position before this
// update, apply update t+1, then advance t and the position.
//
// OptimizerState is what a checkpoint stores next to the two moment buffers, so that a
// restored run's next update is bit-identical; save_state/load_state write it with the
// moments to one checksummed file. begin_phase implements phase_start (keep_moments|reset).
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>

#include "lansbert/core/file_io.h"
#include "lansbert/core/status.h"
#include "lansbert/model/param_table.h"
#include "lansbert/optim/loss_scaler.h"
#include "lansbert/optim/optimizer.h"
#include "lansbert/optim/schedule.h"

namespace lansbert {

// How a phase starts from the previous phase's weights.
enum class PhaseStart {
  // Keep m, v and continue t (gluon-nlp, the LANS authors' code base). The default: the
  // moments were accumulated over t updates, so bias corrections for t stay consistent with
  // them, and phase 2 inherits phase 1's curvature estimates.
  kKeepMoments,
  // Zero m, v and restart t at 0: phase 2 as a fresh optimizer.
  kReset,
};
Status parse_phase_start(const std::string& s, PhaseStart* out);
const char* phase_start_name(PhaseStart p);

struct UpdaterConfig {
  OptimizerConfig optimizer;
  ScheduleConfig schedule;
  LossScalerConfig loss_scale;
  PhaseStart phase_start = PhaseStart::kKeepMoments;
};

// The scalars a checkpoint needs; the moments are the FlatBuffers' m and v.
struct OptimizerState {
  std::string optimizer = "lans";  // checked on load: moments of another rule are refused
  int64_t step = 0;                // t: applied updates (bias correction)
  int64_t schedule_step = 0;       // updates applied in the current phase
  int64_t skipped_steps = 0;       // all skipped updates
  int64_t consecutive_skips = 0;
  int64_t phase = 0;                         // begin_phase calls so far
  std::string phase_start = "keep_moments";  // how the current phase started
  LossScalerState scaler;
};

struct StepReport {
  bool skipped = false;
  double lr = 0;          // applied learning rate (0 when skipped)
  double loss_scale = 1;  // scale the gradients carried
  UpdateStats stats;      // grad norm and clip (when applied)
  GradCheck check;        // non-finite blocks (when skipped)
};

// Buffers in device memory (backend: cuda): the two passes the Updater itself makes over
// the flat buffers go through these instead of host loops. The train layer fills them from
// its DeviceBackend; the optim layer stays device-agnostic.
struct UpdaterDeviceHooks {
  // Replaces LossScaler::unscale_and_check: multiply grads[begin, end) by 1/scale (scale: the
  // scaler's current scale) and count its non-finite values per table block. [begin, end)
  // is this rank's shard of a sharded update (its reduced gradients), else everything.
  std::function<GradCheck(const ParamTable& table, float* grads, double scale, size_t begin, size_t end)>
      unscale_and_check;
  // Zeroes n floats (m and v in begin_phase with phase_start: reset).
  std::function<void(float* p, size_t n)> zero;
};

class Updater {
 public:
  // Validates every part; fails with a message naming the field.
  static Status create(const UpdaterConfig& config, std::unique_ptr<Updater>* out);
  // The same with a given optimizer (e.g. a device one; its name must be
  // config.optimizer.name) and device hooks; both hooks must be set.
  static Status create(const UpdaterConfig& config, std::unique_ptr<Optimizer> optimizer,
                       UpdaterDeviceHooks hooks, std::unique_ptr<Updater>* out);

  // One global batch. REQUIRES: buffers sized table.total_elements(). Grads are unscaled in
  // place. Returns an error only when the loss scaler gives up (see LossScaler).
  Status step(const ParamTable& table, const FlatBuffers& buf, StepReport* report);

  // Starts the next phase with its own schedule: resets the schedule position; with
  // config().phase_start == kReset also zeroes m and v and restarts t.
  Status begin_phase(const ScheduleConfig& schedule, const FlatBuffers& buf, size_t elements);

  // Sharded (ZeRO-1) updates: the optimizer updates only shard.begin..end with shard-sized
  // m and v (see ShardSpec), and the inf/NaN verdict is summed over ranks with
  // shard.reduce_sums so every rank skips or applies the same step. The check (host, or the
  // device hook given the shard's range) reads only the shard, this rank's reduced
  // gradients. begin_phase's `elements` is then the shard's length.
  void set_shard(const ShardSpec& shard) {
    shard_ = shard;
    optimizer_->set_shard(shard);
  }

  double loss_scale() const { return scaler_.scale(); }
  OptimizerState state() const;
  // Refuses state of another optimizer, naming both; `other_rule_hint` (the caller's way to
  // switch rules) is appended to that message. Refuses impossible counters field by field.
  Status set_state(const OptimizerState& s, std::string_view other_rule_hint = {});
  const UpdaterConfig& config() const { return config_; }
  const Optimizer& optimizer() const { return *optimizer_; }
  const LrSchedule& schedule() const { return schedule_; }

 private:
  Updater(const UpdaterConfig& config, std::unique_ptr<Optimizer> opt);

  UpdaterConfig config_;
  std::unique_ptr<Optimizer> optimizer_;
  LrSchedule schedule_;
  LossScaler scaler_;
  OptimizerState counters_;  // scaler field unused; the scaler holds its own
  ShardSpec shard_;
  UpdaterDeviceHooks device_;  // empty: host buffers
};

// One file: magic, version, the scalars as JSON, then m and v raw (little-endian fp32), then
// a CRC32C of everything before it (version 2; version 1 files, still read, end with an
// FNV-1a 64 instead). Written to path.tmp and renamed. `written`,
// when given, is handed every byte as it is written (a checkpoint takes the file's CRC32C
// there instead of reading the file back).
Status save_state(const std::string& path, const OptimizerState& state, const float* m,
                  const float* v, size_t elements, const BytesSeen& written = {});
// Fails (corrupt) on a bad magic, version, size or checksum, and when elements differs; on
// failure m and v may have been overwritten and must not be used. `seen`, when given, is
// handed every byte read, in file order: a checkpoint reader takes the file's CRC32C on the
// one read that loads it (a file read whole ends with its checksum's bytes).
Status load_state(const std::string& path, OptimizerState* state, float* m, float* v,
                  size_t elements, const BytesSeen& seen = {});

// The scalars alone, for a checkpoint's metadata; exact round trip (doubles as %.17g).
std::string state_to_json(const OptimizerState& s);
Status state_from_json(const std::string& json, OptimizerState* s);

}  // namespace lansbert
