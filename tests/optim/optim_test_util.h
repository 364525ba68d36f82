// Shared by the optimizer tests: a small hand-built parameter table with its four flat
// buffers, and double-precision reference steps written directly from the formulas of
// /work/shared/docs/OPTIMIZERS.md (not from the implementation), block by block.
#pragma once

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <vector>

#include "lansbert/model/param_table.h"
#include "lansbert/optim/optimizer.h"

namespace lansbert::testing {

// Flat fp32 buffers for a table, gaps zero.
struct Flat {
  explicit Flat(const ParamTable& t)
      : p(t.total_elements(), 0.f),
        g(t.total_elements(), 0.f),
        m(t.total_elements(), 0.f),
        v(t.total_elements(), 0.f) {}
  FlatBuffers buffers() { return {p.data(), g.data(), m.data(), v.data()}; }
  std::vector<float> p, g, m, v;
};

// weight [2,3] (decays), bias [3] (excluded), LayerNorm gamma [4] (excluded).
inline ParamTable small_table() {
  ParamTable t;
  t.add("w", {2, 3}, ParamRole::kWeight);
  t.add("b", {3}, ParamRole::kBias);
  t.add("gamma", {4}, ParamRole::kLayerNormGamma);
  return t;
}

inline void set_block(const ParamTable& t, size_t b, std::vector<float>* buf,
                      const std::vector<double>& values) {
  for (size_t i = 0; i < values.size(); ++i)
    (*buf)[t[b].offset + i] = static_cast<float>(values[i]);
}

// Per-block double state of the reference.
struct RefBlock {
  std::vector<double> p, m, v;
  double wd = 0;
  // The trust ratios the last reference step applied (LANS: of u_m and u_g; LAMB: ratio,
  // NaN where it applies none; AdamW: NaN).
  double ratio = std::nan(""), ratio_g = std::nan("");
};

inline double norm(const std::vector<double>& x) {
  double s = 0;
  for (double e : x) s += e * e;
  return std::sqrt(s);
}
inline double ratio(double pn, double un) {
  return (pn == 0 || un == 0) ? 1.0 : pn / un;
}

// LANS, OPTIMIZERS.md steps 1-7, for one block.
inline void ref_lans(RefBlock* b, const std::vector<double>& g, int t, double lr, double b1,
                     double b2, double eps) {
  const size_t n = g.size();
  const double gn = norm(g), pn = norm(b->p);
  std::vector<double> gh(n), um(n), ug(n);
  for (size_t i = 0; i < n; ++i) gh[i] = gn != 0 ? g[i] / (gn + eps) : g[i];
  for (size_t i = 0; i < n; ++i) {
    b->m[i] = b1 * b->m[i] + (1 - b1) * gh[i];
    b->v[i] = b2 * b->v[i] + (1 - b2) * gh[i] * gh[i];
    const double d = std::sqrt(b->v[i] / (1 - std::pow(b2, t))) + eps;
    um[i] = (b->m[i] / (1 - std::pow(b1, t))) / d + b->wd * b->p[i];
    ug[i] = gh[i] / d + b->wd * b->p[i];
  }
  const double rm = ratio(pn, norm(um)), rg = ratio(pn, norm(ug));
  for (size_t i = 0; i < n; ++i) b->p[i] -= lr * b1 * rm * um[i] + lr * (1 - b1) * rg * ug[i];
  b->ratio = rm;
  b->ratio_g = rg;
}

// LAMB/AdamW element update after clipping, for one block; use_ratio selects LAMB's trust
// ratio (false gives AdamW).
inline void ref_adam_family(RefBlock* b, const std::vector<double>& g, double clip, int t,
                            double lr, double b1, double b2, double eps, bool use_ratio) {
  const size_t n = g.size();
  const double pn = norm(b->p);
  std::vector<double> u(n);
  for (size_t i = 0; i < n; ++i) {
    const double gc = g[i] / clip;
    b->m[i] = b1 * b->m[i] + (1 - b1) * gc;
    b->v[i] = b2 * b->v[i] + (1 - b2) * gc * gc;
    u[i] = (b->m[i] / (1 - std::pow(b1, t))) / (std::sqrt(b->v[i] / (1 - std::pow(b2, t))) + eps) +
           b->wd * b->p[i];
  }
  const double r = use_ratio ? ratio(pn, norm(u)) : 1.0;
  for (size_t i = 0; i < n; ++i) b->p[i] -= lr * r * u[i];
  b->ratio = use_ratio ? r : std::nan("");
}

// apex: divide by G/max when G > max.
inline double ref_clip(const std::vector<std::vector<double>>& grads, double max_norm) {
  double s = 0;
  for (const auto& g : grads)
    for (double e : g) s += e * e;
  const double G = std::sqrt(s);
  return (max_norm > 0 && G > max_norm) ? G / max_norm : 1.0;
}

// Compares an update's reported trust ratios (UpdateStats::trust_ratio, or trust_ratio_grad
// with `grad`) with the reference's to `tol` relative: NaN where the reference applied none.
inline void expect_ratios_near(const std::vector<double>& got, const std::vector<RefBlock>& ref, bool grad,
                               double tol) {
  ASSERT_EQ(got.size(), ref.size());
  for (size_t b = 0; b < ref.size(); ++b) {
    const double want = grad ? ref[b].ratio_g : ref[b].ratio;
    if (std::isnan(want)) {
      EXPECT_TRUE(std::isnan(got[b])) << "block " << b << ": " << got[b];
    } else {
      EXPECT_NEAR(got[b], want, tol * want) << "block " << b;
    }
  }
}

// Compares the fp32 buffers of block b with the reference, relative tolerance tol (with a
// 1e-6 floor so values near 0 compare absolutely).
inline void expect_block_near(const ParamTable& t, size_t b, const Flat& f, const RefBlock& r,
                              double tol) {
  for (size_t i = 0; i < r.p.size(); ++i) {
    const size_t j = t[b].offset + i;
    EXPECT_NEAR(f.p[j], r.p[i], tol * (1e-6 + std::fabs(r.p[i]))) << t[b].name << "[" << i << "] p";
    EXPECT_NEAR(f.m[j], r.m[i], tol * (1e-6 + std::fabs(r.m[i]))) << t[b].name << "[" << i << "] m";
    EXPECT_NEAR(f.v[j], r.v[i], tol * (1e-6 + std::fabs(r.v[i]))) << t[b].name << "[" << i << "] v";
  }
}

// A deterministic pseudo-random value in [-1, 1) (a 64-bit LCG), for test data.
struct Lcg {
  uint64_t s;
  explicit Lcg(uint64_t seed) : s(seed * 2862933555777941757ull + 3037000493ull) {}
  double next() {
    s = s * 6364136223846793005ull + 1442695040888963407ull;
    return static_cast<double>(s >> 11) / static_cast<double>(1ull << 52) - 1.0;
  }
};

}  // namespace lansbert::testing
