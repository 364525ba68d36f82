// The roofline floor of a profiled step (`lansbert bench --profile --roofline GPU`): each op
// takes at least the longer of its FLOPs at the device's peak and its bytes at the device's
// memory bandwidth (Williams, Waterman, Patterson 2009). Summed over the ops of a step, that
// is the shortest step this decomposition into ops can run in on that device, whatever the
// kernels: a ceiling on MFU that says how much of the gap to a bar is kernel quality and how
// much is traffic the op structure itself implies (activations stored in fp32, unfused passes).
// Taken per call (ProfilingOps::set_roofline), since one op name covers both FLOP-bound and
// memory-bound calls (the weight-gradient GEMMs of a small batch are the latter).
#pragma once

#include <algorithm>

namespace lansbert {

struct Roofline {
  double flops_per_s = 0;  // GEMM peak for the precision in use
  double bytes_per_s = 0;  // memory bandwidth

  double floor_seconds(double flops, double bytes) const {
    return std::max(flops_per_s > 0 ? flops / flops_per_s : 0.0, bytes_per_s > 0 ? bytes / bytes_per_s : 0.0);
  }
  // Whether an op's floor is set by its FLOPs rather than its bytes.
  bool compute_bound(double flops, double bytes) const {
    return flops_per_s > 0 && bytes_per_s > 0 && flops / flops_per_s >= bytes / bytes_per_s;
  }
};

// A step's floor split by what bounds each call.
struct RooflineFloor {
  double compute_bound_s = 0;  // calls whose FLOPs set their floor (the GEMMs, mostly)
  double memory_bound_s = 0;   // calls whose bytes do
  double total() const { return compute_bound_s + memory_bound_s; }
};

// Sums the rows' floors (ProfilingOps::entries() with a roofline set), per step.
template <typename Rows>
RooflineFloor roofline_floor(const Rows& rows, int steps) {
  RooflineFloor f;
  for (const auto& row : rows) {
    f.compute_bound_s += row.second.floor_compute_seconds / steps;
    f.memory_bound_s += (row.second.floor_seconds - row.second.floor_compute_seconds) / steps;
  }
  return f;
}

}  // namespace lansbert
