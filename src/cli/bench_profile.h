// `lansbert bench --profile`: the per-op table (time, calls, share, FLOPs, modelled bytes,
// achieved rate) and, for a GPU model from the peak table, each op's roofline floor and the
// step's (backend/roofline.h).
#pragma once

#include <string>

#include "lansbert/backend/ops.h"
#include "lansbert/backend/profiling_ops.h"
#include "lansbert/backend/roofline.h"
#include "lansbert/core/status.h"
#include "lansbert/train/device_peaks.h"

namespace lansbert::cli {

// What the floor is taken against: a GPU model of the peak table and the GEMM precision.
struct RooflineTarget {
  const DevicePeak* device = nullptr;  // null: no floor columns
  GemmMath math = GemmMath::kFp32;
  bool measured_on_it = false;  // the bench ran on this device: compare the step with the floor
};

// --roofline NAME: a model of the peak table (as `train --dry-run --gpu`), or an error that
// lists them.
Status parse_roofline_device(const std::string& name, const DevicePeak** out);

// The peaks of the target (zero without one): ProfilingOps::set_roofline before the run.
Roofline roofline_for(const RooflineTarget& t);

// The table, largest time first, per step (entries summed over `steps`); step_seconds is the
// measured forward+backward; model_flops the step's FLOPs as bench counts them (MFU).
void print_profile(const ProfilingOps<float>& p, int steps, double step_seconds, double model_flops,
                   const RooflineTarget& target);

// The same for `--json`: fields to append inside bench's JSON object (starting with a comma):
// "profile" (one object per op, largest time first) and, with a target, "roofline_device",
// "roofline_floor_ms" and "roofline_mfu_ceiling".
void print_profile_json(const ProfilingOps<float>& p, int steps, double model_flops, const RooflineTarget& target);

}  // namespace lansbert::cli
