// Peak dense throughput per GPU model, in TFLOP/s (vendor data sheets, dense, no sparsity):
// fp16/bf16 tensor cores, plain fp32 (CUDA cores) and TF32 tensor cores; the MFU of
// `lansbert bench` and of the trainer's log lines. With the memory bandwidth (TB/s, SXM
// parts unless named), the roofline floor of `bench --profile` (cli/bench_profile.h).
// Looked up by substring of the device's description ("NVIDIA H200 (sm_90, 139 GiB)"), or
// of a model a user typed (`train --dry-run --gpu h100`), ignoring case; the first match
// wins, so more specific names come first.
#pragma once

#include <algorithm>
#include <cctype>
#include <cstring>
#include <string>

#include "lansbert/backend/ops.h"

namespace lansbert {

struct DevicePeak {
  const char* match;     // substring of the device name
  const char* name;      // as printed
  double half_tflops;    // dense fp16/bf16 (V100: fp16 only)
  double fp32_tflops;    // fp32 without tensor cores
  double tf32_tflops;    // TF32 tensor cores (V100 has none: its fp32 peak)
  int compute_capability;  // 10 * major + minor (`train --dry-run --gpu` checks the precision with it)
  double memory_tbps;      // HBM bandwidth, 1e12 bytes/s
};

inline constexpr DevicePeak kDevicePeaks[] = {
    {"H200", "H200", 989, 67, 494, 90, 4.8},
    {"H100 PCIe", "H100 PCIe", 756, 51, 378, 90, 2.0},
    {"H100", "H100 SXM", 989, 67, 494, 90, 3.35},
    {"A100-SXM4-80GB", "A100-SXM4-80GB", 312, 19.5, 156, 80, 2.039},  // cudaDeviceProp::name of the 80 GB SXM part
    {"A100 80GB PCIe", "A100 80GB PCIe", 312, 19.5, 156, 80, 1.935},
    {"A100", "A100", 312, 19.5, 156, 80, 1.555},                 // 40 GB (p4d.24xlarge)
    {"V100", "V100", 125, 15.7, 15.7, 70, 0.9},
};

inline const DevicePeak* find_device_peak(const std::string& description) {
  auto upper = [](std::string s) {
    std::transform(s.begin(), s.end(), s.begin(), [](unsigned char ch) { return char(std::toupper(ch)); });
    return s;
  };
  const std::string text = upper(description);
  for (const DevicePeak& p : kDevicePeaks)
    if (text.find(upper(p.match)) != std::string::npos) return &p;
  return nullptr;
}

// "H200, H100 PCIe, ...": the models find_device_peak knows, for error messages.
inline std::string device_peak_names() {
  std::string known;
  for (const DevicePeak& k : kDevicePeaks) known += (known.empty() ? "" : ", ") + std::string(k.name);
  return known;
}

// The peak that GEMMs of `math` can reach on `p`: the 16-bit tensor cores' for bf16/fp16,
// TF32's for tf32, plain fp32's otherwise.
inline double peak_tflops_for(const DevicePeak& p, GemmMath math) {
  return is_half_gemm(math) ? p.half_tflops : math == GemmMath::kTf32 ? p.tf32_tflops : p.fp32_tflops;
}

}  // namespace lansbert
