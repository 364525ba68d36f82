// 16-bit FFN activations on the CPU backend (Ops::gemm_bias_half, gelu_forward_half_kept,
// bias_gelu_backward_half_kept): the GEMM's 16-bit output is its fp32 result rounded once
// (against a naive fp64 GEMM too), the GELU reads the widened 16-bit input (against an fp64
// erf GELU), the backward uses d(act) at its 16-bit rounding whether it comes from a kept copy
// or from fp32 (cast reuse changes no bits), and its gradient matches finite differences in
// fp64 at the widened point.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <string>

#include "fd.h"
#include "lansbert/backend/cpu_ops.h"
#include "naive_gemm.h"

namespace lansbert {
namespace {

using testing::cast;
using testing::random_vec;

bool same_bits(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

std::vector<uint16_t> to_half(const std::vector<double>& x, kern::HalfFormat f) {
  std::vector<uint16_t> h(x.size());
  for (size_t i = 0; i < x.size(); ++i) h[i] = kern::float_to_half(float(x[i]), f);
  return h;
}

std::vector<double> widen(const std::vector<uint16_t>& h, kern::HalfFormat f) {
  std::vector<double> x(h.size());
  for (size_t i = 0; i < h.size(); ++i) x[i] = kern::half_to_float(h[i], f);
  return x;
}

// The largest spacing relative to the value: 8 and 11 significant bits.
double ulp_of(kern::HalfFormat f) { return f == kern::HalfFormat::kBf16 ? 1.0 / 128 : 1.0 / 1024; }

const GemmMath kHalfModes[] = {GemmMath::kBf16, GemmMath::kFp16};

TEST(HalfActivations, OnlyWith16BitGemms) {
  EXPECT_FALSE(cpu::make_ops<float>(GemmMath::kFp32)->half_activations());
  EXPECT_TRUE(cpu::make_ops<float>(GemmMath::kBf16)->half_activations());
  EXPECT_TRUE(cpu::make_ops<float>(GemmMath::kFp16, false)->half_activations());
}

// out = the fp32 gemm_bias result rounded once, bit for bit; and within half an ulp (plus the
// fp32 sum's error) of a naive fp64 GEMM on the rounded operands.
TEST(HalfActivations, GemmBiasHalfIsTheFp32ResultRoundedOnce) {
  const int m = 13, n = 24, k = 40;
  const auto a = cast<float>(random_vec(size_t(m) * k, 1)), w = cast<float>(random_vec(size_t(n) * k, 2));
  const auto bias = cast<float>(random_vec(n, 3));
  for (GemmMath math : kHalfModes) {
    const kern::HalfFormat f = gemm_half_format(math);
    auto ops = cpu::make_ops<float>(math);
    std::vector<float> c(size_t(m) * n), scratch(c.size());
    std::vector<uint16_t> out(c.size());
    ops->gemm_bias(Trans::kNo, Trans::kYes, m, n, k, a.data(), k, w.data(), k, bias.data(), c.data(), n);
    ops->gemm_bias_half(Trans::kNo, Trans::kYes, m, n, k, a.data(), k, w.data(), k, bias.data(), scratch.data(),
                        out.data());
    std::vector<double> ar(a.size()), wr(w.size());
    for (size_t i = 0; i < a.size(); ++i) ar[i] = kern::round_to_half(a[i], f);
    for (size_t i = 0; i < w.size(); ++i) wr[i] = kern::round_to_half(w[i], f);
    std::vector<double> ref(size_t(m) * n, 0.0);
    testing::naive_gemm(Trans::kNo, Trans::kYes, m, n, k, 1.0, ar.data(), k, wr.data(), k, 0.0, ref.data(), n);
    for (size_t i = 0; i < out.size(); ++i) {
      ASSERT_EQ(out[i], kern::float_to_half(c[i], f)) << gemm_math_name(math) << " element " << i;
      const double want = ref[i] + bias[i % n], got = kern::half_to_float(out[i], f);
      ASSERT_LE(std::fabs(got - want), 0.5 * ulp_of(f) * std::fabs(want) + 1e-5) << gemm_math_name(math) << " " << i;
    }
  }
}

// y = gelu(widened x), the exact erf GELU: written in fp32 without cast reuse, as a copy GEMMs
// read with it (the same bits as widening, gelu_forward_kept, and a GEMM).
TEST(HalfActivations, GeluForwardReadsTheWidenedInput) {
  const int rows = 7, cols = 19;
  const size_t n = size_t(rows) * cols;
  const auto w = cast<float>(random_vec(size_t(cols) * 5, 5));
  for (GemmMath math : kHalfModes) {
    const kern::HalfFormat f = gemm_half_format(math);
    const auto x16 = to_half(random_vec(n, 4, -4, 4), f);
    const auto xw = widen(x16, f);
    auto written = cpu::make_ops<float>(math, false);
    std::vector<float> y(n);
    written->gelu_forward_half_kept(x16.data(), y.data(), n);
    for (size_t i = 0; i < n; ++i) {
      const double want = 0.5 * xw[i] * (1 + std::erf(xw[i] / std::sqrt(2.0)));
      ASSERT_NEAR(y[i], want, 2e-6 * (1 + std::fabs(want))) << gemm_math_name(math) << " " << i;
    }
    auto kept = cpu::make_ops<float>(math), plain = cpu::make_ops<float>(math);
    std::vector<float> y2(n, std::numeric_limits<float>::quiet_NaN()), y3(n), z2(size_t(rows) * 5), z3(z2.size());
    const std::vector<float> xf(xw.begin(), xw.end());
    kept->gelu_forward_half_kept(x16.data(), y2.data(), n);
    plain->gelu_forward_kept(xf.data(), y3.data(), n);
    kept->gemm(Trans::kNo, Trans::kNo, rows, 5, cols, 1.f, y2.data(), cols, w.data(), 5, 0.f, z2.data(), 5);
    plain->gemm(Trans::kNo, Trans::kNo, rows, 5, cols, 1.f, y3.data(), cols, w.data(), 5, 0.f, z3.data(), 5);
    EXPECT_TRUE(same_bits(z2, z3)) << gemm_math_name(math);
    EXPECT_TRUE(std::isnan(y2[0])) << "the fp32 output was written although only its copy is read";
  }
}

// The backward as the model calls it (d(act) the dX GEMM's kept output, d(pre) at its address):
// with cast reuse it reads d(act)'s copy, without it rounds fp32 d(act) itself: the same bias
// gradients and the same d(pre) as GEMMs read it, equal to the plain fused backward on the
// rounded d(act) and the widened pre.
TEST(HalfActivations, GeluBackwardUsesTheRoundedGradientEitherWay) {
  const int rows = 9, cols = 21, in = 6;
  const size_t n = size_t(rows) * cols;
  const auto dy = cast<float>(random_vec(size_t(rows) * in, 6)), wt = cast<float>(random_vec(size_t(in) * cols, 7));
  const auto w2 = cast<float>(random_vec(size_t(cols) * 4, 8));
  for (GemmMath math : kHalfModes) {
    const kern::HalfFormat f = gemm_half_format(math);
    const auto pre16 = to_half(random_vec(n, 9, -3, 3), f);
    std::vector<std::vector<float>> reads, biases;
    for (bool reuse : {true, false}) {
      auto ops = cpu::make_ops<float>(math, reuse);
      ASSERT_EQ(ops->kept_outputs_unwritten(), reuse);
      std::vector<float> d(n, 0.f), db(cols, 0.25f), z(size_t(rows) * 4);
      ops->gemm_kept(Trans::kNo, Trans::kNo, rows, cols, in, dy.data(), in, wt.data(), cols, d.data(), cols);
      ops->bias_gelu_backward_half_kept(d.data(), pre16.data(), d.data(), db.data(), rows, cols);
      ops->gemm(Trans::kNo, Trans::kNo, rows, 4, cols, 1.f, d.data(), cols, w2.data(), 4, 0.f, z.data(), 4);
      ops->drop_gemm_operand(d.data());
      reads.push_back(z);
      biases.push_back(db);
    }
    EXPECT_TRUE(same_bits(reads[0], reads[1])) << gemm_math_name(math) << ": cast reuse changed d(pre)";
    EXPECT_TRUE(same_bits(biases[0], biases[1])) << gemm_math_name(math) << ": cast reuse changed d(bias)";
    // The plain ops on the rounded d(act) and the widened pre.
    auto plain = cpu::make_ops<float>(math, false);
    std::vector<float> d(n), db(cols, 0.25f), z(size_t(rows) * 4);
    plain->gemm(Trans::kNo, Trans::kNo, rows, cols, in, 1.f, dy.data(), in, wt.data(), cols, 0.f, d.data(), cols);
    for (float& v : d) v = kern::round_to_half(v, f);
    const auto pw = widen(pre16, f);
    const std::vector<float> pf(pw.begin(), pw.end());
    plain->bias_gelu_backward(d.data(), pf.data(), d.data(), db.data(), rows, cols);
    plain->gemm(Trans::kNo, Trans::kNo, rows, 4, cols, 1.f, d.data(), cols, w2.data(), 4, 0.f, z.data(), 4);
    EXPECT_TRUE(same_bits(reads[1], z)) << gemm_math_name(math);
    EXPECT_TRUE(same_bits(biases[1], db)) << gemm_math_name(math);
  }
}

// loss = sum(w * gelu(x)) at x = the widened 16-bit pre-activation, w exactly representable in
// the format (so its rounding is the identity): d(pre) and d(bias) from the backward (float:
// the CPU emulates 16-bit GEMMs in float only) against central differences of the loss in fp64.
TEST(HalfActivations, GeluBackwardMatchesFiniteDifferences) {
  const int rows = 4, cols = 6;
  const size_t n = size_t(rows) * cols;
  auto fp64 = cpu::make_ops<double>();
  for (GemmMath math : kHalfModes) {
    const kern::HalfFormat f = gemm_half_format(math);
    auto ops = cpu::make_ops<float>(math, false);
    const auto pre16 = to_half(random_vec(n, 11, -2.5, 2.5), f);
    std::vector<double> x = widen(pre16, f);
    const std::vector<double> w = widen(to_half(random_vec(n, 12), f), f);
    auto loss = [&] {
      std::vector<double> act(n);
      fp64->gelu_forward(x.data(), act.data(), n);
      double s = 0;
      for (size_t i = 0; i < n; ++i) s += w[i] * act[i];
      return s;
    };
    const std::vector<float> wf(w.begin(), w.end());
    std::vector<float> dpre(n), dbias(cols, 0.f);
    ops->bias_gelu_backward_half_kept(wf.data(), pre16.data(), dpre.data(), dbias.data(), rows, cols);
    const std::vector<double> analytic(dpre.begin(), dpre.end());
    EXPECT_LT(testing::check_gradient(x, analytic, loss), 1e-6) << gemm_math_name(math);
    std::vector<double> col(cols, 0.0);
    for (size_t i = 0; i < n; ++i) col[i % cols] += dpre[i];
    for (int c = 0; c < cols; ++c) EXPECT_NEAR(dbias[c], col[c], 1e-5) << gemm_math_name(math);
  }
}

// The bias sums of a kept gradient (d(q, k, v) with the flash attention): the column sums of
// its 16-bit rounding, from the copy with cast reuse and rounded in the pass without, the same
// bits; plain fp32 sums where GEMMs are fp32.
TEST(HalfActivations, BiasSumsOfAKeptGradientUseItsRounding) {
  const int rows = 37, cols = 70;
  const size_t n = size_t(rows) * cols;
  const auto g = cast<float>(random_vec(n, 13, -3, 3));
  for (GemmMath math : {GemmMath::kBf16, GemmMath::kFp16, GemmMath::kFp32}) {
    std::vector<std::vector<float>> sums;
    for (bool reuse : {true, false}) {
      auto ops = cpu::make_ops<float>(math, reuse);
      std::vector<float> x = g, db(cols, 0.5f);
      ops->keep_gemm_operand(x.data(), n);
      if (ops->kept_outputs_unwritten()) std::fill(x.begin(), x.end(), std::nanf(""));  // only the copy is read
      ops->bias_add_backward_of_kept(x.data(), db.data(), rows, cols);
      ops->drop_gemm_operand(x.data());
      sums.push_back(db);
    }
    EXPECT_TRUE(same_bits(sums[0], sums[1])) << gemm_math_name(math);
    auto plain = cpu::make_ops<float>(math, false);
    std::vector<float> r = g, db(cols, 0.5f);
    if (is_half_gemm(math))
      for (float& v : r) v = kern::round_to_half(v, gemm_half_format(math));
    plain->bias_add_backward(r.data(), db.data(), rows, cols);
    EXPECT_TRUE(same_bits(sums[1], db)) << gemm_math_name(math);
  }
}

TEST(HalfActivationsDeathTest, RefusedWithoutA16BitFormat) {
  auto ops = cpu::make_ops<float>(GemmMath::kFp32);
  std::vector<uint16_t> x(4);
  std::vector<float> y(4);
  EXPECT_DEATH(ops->gelu_forward_half_kept(x.data(), y.data(), 4), "16-bit activations need bf16/fp16 GEMMs");
}

}  // namespace
}  // namespace lansbert
