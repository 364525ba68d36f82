#include "bench_profile.h"

#include <algorithm>
#include <cstdio>
#include <utility>
#include <vector>

#include "lansbert/backend/roofline.h"

namespace lansbert::cli {

Status parse_roofline_device(const std::string& name, const DevicePeak** out) {
  *out = find_device_peak(name);
  if (!*out)
    return Status::invalid_argument("bench: --roofline: unknown GPU model '" + name + "' (known: " +
                                    device_peak_names() + ")");
  return Status::ok();
}

namespace {

// "12.3 TFLOP/s" or "456 GB/s": what the op achieved in the unit of what bounds it (its FLOPs
// where it has any and they dominate on the target, else its bytes).
std::string achieved(double flops, double bytes, double seconds, bool by_flops) {
  char buf[32];
  if (seconds <= 0) return "-";
  if (by_flops)
    std::snprintf(buf, sizeof buf, "%.2f TFLOP/s", flops / seconds / 1e12);
  else
    std::snprintf(buf, sizeof buf, "%.1f GB/s", bytes / seconds / 1e9);
  return buf;
}

std::vector<std::pair<std::string, ProfilingOps<float>::Entry>> rows_by_time(const ProfilingOps<float>& p) {
  std::vector<std::pair<std::string, ProfilingOps<float>::Entry>> rows(p.entries().begin(), p.entries().end());
  std::sort(rows.begin(), rows.end(), [](auto& a, auto& b) { return a.second.seconds > b.second.seconds; });
  return rows;
}

// The MFU a step at its floor would reach: the model's FLOPs over the floor at the peak.
double mfu_ceiling(const RooflineFloor& f, const Roofline& r, double model_flops) {
  return f.total() > 0 ? model_flops / f.total() / r.flops_per_s : 0.0;
}

}  // namespace

Roofline roofline_for(const RooflineTarget& t) {
  if (!t.device) return {};
  return {1e12 * peak_tflops_for(*t.device, t.math), 1e12 * t.device->memory_tbps};
}

void print_profile_json(const ProfilingOps<float>& p, int steps, double model_flops, const RooflineTarget& target) {
  std::printf(",\"profile\":[");
  bool first = true;
  for (const auto& [name, e] : rows_by_time(p)) {
    std::printf("%s{\"op\":\"%s\",\"ms\":%.4f,\"calls\":%ld,\"gflop\":%.4f,\"mb\":%.3f", first ? "" : ",",
                name.c_str(), 1e3 * e.seconds / steps, e.calls / steps, e.flops / steps / 1e9, e.bytes / steps / 1e6);
    if (target.device) std::printf(",\"floor_ms\":%.4f", 1e3 * e.floor_seconds / steps);
    std::printf("}");
    first = false;
  }
  std::printf("]");
  if (!target.device) return;
  const RooflineFloor f = roofline_floor(p.entries(), steps);
  std::printf(",\"roofline_device\":\"%s\",\"roofline_floor_ms\":%.4f,\"roofline_mfu_ceiling\":%.4f",
              target.device->name, 1e3 * f.total(), mfu_ceiling(f, roofline_for(target), model_flops));
}

void print_profile(const ProfilingOps<float>& p, int steps, double step_seconds, double model_flops,
                   const RooflineTarget& target) {
  const auto rows = rows_by_time(p);
  const Roofline r = roofline_for(target);
  int width = 24;  // the longest op name, so the columns line up
  for (const auto& row : rows) width = std::max(width, int(row.first.size()));
  std::printf("  %-*s %10s %8s %7s %11s %10s %14s", width, "op", "ms/step", "calls", "share", "GFLOP/step", "MB/step",
              "achieved");
  if (target.device) std::printf(" %10s %7s", "floor ms", "bound");
  std::printf("\n");
  for (const auto& [name, e] : rows) {
    const double s = e.seconds / steps, flops = e.flops / steps, bytes = e.bytes / steps;
    // What bounds the row's floor: its FLOP-bound calls' share of it (without a target, GEMM
    // rows are rated by FLOPs and the rest by bytes).
    const double compute_share = e.floor_seconds > 0 ? e.floor_compute_seconds / e.floor_seconds : 0;
    const bool by_flops = target.device ? compute_share >= 0.5 : flops > 0;
    char gflop[16] = "-";
    if (flops > 0) std::snprintf(gflop, sizeof gflop, "%.2f", flops / 1e9);
    std::printf("  %-*s %10.2f %8ld %6.1f%% %11s %10.1f %14s", width, name.c_str(), 1e3 * s, e.calls / steps,
                100 * s / step_seconds, gflop, bytes / 1e6, achieved(flops, bytes, s, by_flops).c_str());
    if (target.device)
      std::printf(" %10.3f %7s", 1e3 * e.floor_seconds / steps,
                  compute_share >= 0.9 ? "flops" : compute_share <= 0.1 ? "memory" : "mixed");
    std::printf("\n");
  }
  if (!target.device) return;
  const RooflineFloor f = roofline_floor(p.entries(), steps);
  std::printf("  roofline floor on %s (%.0f TFLOP/s %s, %.2f TB/s): %.3f ms/step = %.3f ms FLOP-bound ops + %.3f ms "
              "memory-bound ops; MFU at most %.1f%% with these ops at their peaks",
              target.device->name, r.flops_per_s / 1e12, gemm_math_name(target.math), r.bytes_per_s / 1e12,
              1e3 * f.total(), 1e3 * f.compute_bound_s, 1e3 * f.memory_bound_s,
              100 * mfu_ceiling(f, r, model_flops));
  if (target.measured_on_it && f.total() > 0) std::printf("; the measured step is %.2fx the floor", step_seconds / f.total());
  std::printf("\n");
}

}  // namespace lansbert::cli
