// bench_optim: time of one optimizer update over the bert-base parameter table (~110M
// parameters) on this machine, against a memcpy of comparable bytes. A measurement tool, not
// a test (no ctest entry); docs/performance.md records its output.
//
// "State touched" is the nominal traffic of a fused update: params, grads, m, v read and
// params, m, v written = 28 bytes per element. The CPU launcher makes more passes than that
// (LANS/LAMB: norms, moments, apply), so GB/s here is the effective rate at the nominal count.
//
// Usage: bench_optim [preset=bert-base] [reps=5]
#include <omp.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "lansbert/core/buffer.h"
#include "lansbert/model/bert_config.h"
#include "lansbert/optim/loss_scaler.h"
#include "lansbert/optim/optimizer.h"

namespace lansbert {
namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

// Returns {min, median} of the samples.
std::pair<double, double> min_median(std::vector<double> s) {
  std::sort(s.begin(), s.end());
  return {s.front(), s[s.size() / 2]};
}

// Fills with small values that keep every path finite (and first-touches the pages).
void fill(Buffer<float>& b, float base) {
  float* d = b.data();
  const int64_t n = static_cast<int64_t>(b.size());
#pragma omp parallel for schedule(static)
  for (int64_t i = 0; i < n; ++i) d[i] = base * static_cast<float>((i % 97) - 48) / 48.f;
}

int run(const std::string& preset, int reps) {
  BertConfig cfg;
  Status s = bert_preset(preset, &cfg);
  if (!s.is_ok()) {
    std::fprintf(stderr, "%s\n", s.to_string().c_str());
    return 2;
  }
  const ParamTable table = make_bert_param_table(cfg);
  const size_t n = table.total_elements();
  Buffer<float> p(n), g(n), m(n), v(n), dst(4 * n);
  fill(p, 0.05f);
  fill(g, 1e-3f);
  fill(m, 0.f);
  fill(v, 0.f);
  fill(dst, 0.f);
  const double nominal = 28.0 * static_cast<double>(n);  // bytes per update
  std::printf("preset %s: %zu parameters in %zu blocks, %zu elements with gaps\n", preset.c_str(),
              table.parameter_count(), table.size(), n);
  std::printf("nominal state touched per update: %.3f GB (read p,g,m,v; write p,m,v)\n",
              nominal / 1e9);

  for (int threads : {1, omp_get_num_procs()}) {
    omp_set_num_threads(threads);
    // memcpy of p|g|m|v (16 bytes/element read, 16 written: 32 bytes/element of traffic).
    std::vector<double> t_copy;
    for (int r = 0; r < reps; ++r) {
      const auto t0 = Clock::now();
      const float* src[4] = {p.data(), g.data(), m.data(), v.data()};
#pragma omp parallel for schedule(static)
      for (int k = 0; k < 4 * threads; ++k) {
        const int which = k / threads, part = k % threads;
        const size_t lo = n * part / threads, hi = n * (part + 1) / threads;
        std::memcpy(dst.data() + which * n + lo, src[which] + lo, (hi - lo) * sizeof(float));
      }
      t_copy.push_back(seconds_since(t0));
    }
    const auto [cmin, cmed] = min_median(t_copy);
    const double copy_bw = 32.0 * static_cast<double>(n) / cmin / 1e9;
    std::printf(
        "\nthreads %d\n  memcpy 16 B/elem (32 B/elem traffic): min %.1f ms, median %.1f ms, "
        "%.2f GB/s\n",
        threads, cmin * 1e3, cmed * 1e3, copy_bw);

    for (const std::string& name : optimizer_names()) {
      std::unique_ptr<Optimizer> opt;
      if (!make_optimizer(name, OptimizerConfig{}, &opt).is_ok()) return 1;
      FlatBuffers buf{p.data(), g.data(), m.data(), v.data()};
      std::vector<double> t_step;
      for (int r = 0; r <= reps; ++r) {
        const auto t0 = Clock::now();
        opt->update(table, buf, r + 1, 1e-4, nullptr);
        if (r > 0) t_step.push_back(seconds_since(t0));  // r = 0 warms up (plan, pages)
      }
      const auto [smin, smed] = min_median(t_step);
      const double bw = nominal / smin / 1e9;
      std::printf(
          "  %-5s step: min %.1f ms, median %.1f ms, %.2f GB/s nominal "
          "(%.0f%% of memcpy GB/s; a memcpy-speed update would take %.1f ms)\n",
          name.c_str(), smin * 1e3, smed * 1e3, bw, 100 * bw / copy_bw,
          nominal / (copy_bw * 1e9) * 1e3);
    }
    LossScalerConfig lc;
    lc.mode = LossScaleMode::kDynamic;
    lc.initial_scale = 1.0 / 1024;  // a power of two below 1 keeps the values as they are
    lc.min_scale = lc.initial_scale;
    LossScaler scaler(lc);
    std::vector<double> t_scale;
    for (int r = 0; r < reps; ++r) {
      const auto t0 = Clock::now();
      scaler.unscale_and_check(table, g.data());
      t_scale.push_back(seconds_since(t0));
      fill(g, 1e-3f);
    }
    const auto [umin, umed] = min_median(t_scale);
    std::printf("  unscale+check (8 B/elem): min %.1f ms, median %.1f ms, %.2f GB/s\n", umin * 1e3,
                umed * 1e3, 8.0 * static_cast<double>(n) / umin / 1e9);
  }
  return 0;
}

}  // namespace
}  // namespace lansbert

int main(int argc, char** argv) {
  const std::string preset = argc > 1 ? argv[1] : "bert-base";
  const int reps = argc > 2 ? std::max(1, std::atoi(argv[2])) : 5;
  return lansbert::run(preset, reps);
}
