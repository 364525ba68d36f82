// Ops::residual_layernorm_forward, the end of a residual block (y = dropout(y + bias) +
// residual, then LayerNorm): against a naive fp64 formula with the dropout decisions drawn
// element by element (kern::dropout_keep), bit for bit against the two ops it stands for
// (with and without the kept copy of its output), and its backward (residual_layernorm_backward:
// layernorm_backward, then dropout_bias_backward_kept) against fp64 central differences for
// every input. With 16-bit sums (sum_half): the dense output and the sum used at bf16
// rounding, held only as y's kept copy or rounded in fp32 memory, the same bits either way; so
// is the 16-bit gradient stream (grad_half, grad_copy_only) and its accumulation.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>

#include "fd.h"
#include "residual_layernorm_args.h"
#include "lansbert/backend/cpu_ops.h"
#include "lansbert/kernels/dropout.h"
#include "lansbert/kernels/half.h"

namespace lansbert {
namespace {

using testing::check_gradient;
using testing::random_vec;

const RngKey kKey{77, 5, 9};
constexpr double kEps = 0.1;

template <typename T>
ResidualLayerNorm<T> args(T* y, const std::vector<T>& bias, const std::vector<T>& res, int rows, int cols, float p,
                          const std::vector<T>& g, const std::vector<T>& b, T* out, T* mean, T* rstd,
                          T eps = T(1e-12)) {
  return testing::residual_layernorm_args(y, bias.data(), res.data(), rows, cols, p, kKey, g.data(), b.data(), out,
                                          mean, rstd, false, eps);
}

TEST(ResidualLayerNorm, ForwardMatchesNaive) {
  auto ops = cpu::make_ops<double>();
  const int rows = 6, cols = 70;
  const size_t n = size_t(rows) * cols;
  const auto y0 = random_vec(n, 1), bias = random_vec(cols, 2), res = random_vec(n, 3);
  const auto g = random_vec(cols, 4), b = random_vec(cols, 5);
  for (float p : {0.0f, 0.2f}) {
    std::vector<double> y = y0, out(n), mean(rows), rstd(rows);
    // eps 0.1, not BERT's 1e-12: where it sits and that it is used both show at these tolerances.
    ops->residual_layernorm_forward(
        args(y.data(), bias, res, rows, cols, p, g, b, out.data(), mean.data(), rstd.data(), kEps));
    int dropped = 0;
    for (int r = 0; r < rows; ++r) {
      std::vector<double> x(cols);
      for (int c = 0; c < cols; ++c) {
        const size_t i = size_t(r) * cols + c;
        const bool keep = p == 0.0f || kern::dropout_keep(kKey, i, p);
        dropped += !keep;
        x[c] = (keep ? (y0[i] + bias[c]) / (1.0 - double(p)) : 0.0) + res[i];
        EXPECT_NEAR(y[i], x[c], 1e-12) << "the sum stays in y, p " << p;
      }
      double m = 0, v = 0;
      for (double e : x) m += e / cols;
      for (double e : x) v += (e - m) * (e - m) / cols;
      EXPECT_NEAR(mean[r], m, 1e-12);
      EXPECT_NEAR(rstd[r], 1.0 / std::sqrt(v + kEps), 1e-9);
      for (int c = 0; c < cols; ++c)
        EXPECT_NEAR(out[size_t(r) * cols + c], (x[c] - m) / std::sqrt(v + kEps) * g[c] + b[c], 1e-11);
    }
    if (p > 0) {
      EXPECT_GT(dropped, 0);
    }
  }
}

// What the model ran before: the residual pass, then the LayerNorm (kept where keep_out).
template <typename T>
void expect_the_two_ops(GemmMath math) {
  auto fused_ops = cpu::make_ops<T>(math), plain_ops = cpu::make_ops<T>(math);
  const int rows = 9, cols = 36;
  const size_t n = size_t(rows) * cols;
  const auto y0 = testing::cast<T>(random_vec(n, 6)), bias = testing::cast<T>(random_vec(cols, 7));
  const auto res = testing::cast<T>(random_vec(n, 8));
  const auto g = testing::cast<T>(random_vec(cols, 9)), b = testing::cast<T>(random_vec(cols, 10));
  for (float p : {0.0f, 0.1f})
    for (bool keep : {false, true}) {
      std::vector<T> y1 = y0, y2 = y0, out1(n), out2(n), m1(rows), m2(rows), r1(rows), r2(rows);
      auto a = args(y1.data(), bias, res, rows, cols, p, g, b, out1.data(), m1.data(), r1.data());
      a.keep_out = keep;
      fused_ops->residual_layernorm_forward(a);
      plain_ops->bias_dropout_residual_forward(y2.data(), bias.data(), res.data(), rows, cols, p, kKey);
      if (keep)
        plain_ops->layernorm_forward_kept(y2.data(), g.data(), b.data(), out2.data(), m2.data(), r2.data(), rows, cols,
                                          T(1e-12));
      else
        plain_ops->layernorm_forward(y2.data(), g.data(), b.data(), out2.data(), m2.data(), r2.data(), rows, cols,
                                     T(1e-12));
      EXPECT_EQ(y1, y2);
      EXPECT_EQ(m1, m2);
      EXPECT_EQ(r1, r2);
      EXPECT_EQ(out1, out2);
      // The output's kept copy (a GEMM reads it: the same product either way).
      std::vector<T> w = testing::cast<T>(random_vec(size_t(cols) * 4, 11)), c1(size_t(rows) * 4), c2(c1.size());
      fused_ops->gemm(Trans::kNo, Trans::kNo, rows, 4, cols, T(1), out1.data(), cols, w.data(), 4, T(0), c1.data(), 4);
      plain_ops->gemm(Trans::kNo, Trans::kNo, rows, 4, cols, T(1), out2.data(), cols, w.data(), 4, T(0), c2.data(), 4);
      EXPECT_EQ(c1, c2);
      EXPECT_EQ(fused_ops->gemm_operand_conversions(), plain_ops->gemm_operand_conversions());
      fused_ops->drop_gemm_operand(out1.data());
      plain_ops->drop_gemm_operand(out2.data());
    }
}

TEST(ResidualLayerNorm, IsTheResidualPassThenTheLayerNorm) {
  expect_the_two_ops<float>(GemmMath::kFp32);
  expect_the_two_ops<double>(GemmMath::kFp32);
  expect_the_two_ops<float>(GemmMath::kBf16);
}

// loss = sum(w * out): residual_layernorm_backward's LayerNorm part gives d(sum), which is the
// residual's gradient; its dropout-bias part turns it into y's and the bias's.
TEST(ResidualLayerNormGradient, MatchesFiniteDifferences) {
  auto ops = cpu::make_ops<double>();
  const int rows = 5, cols = 12;
  const size_t n = size_t(rows) * cols;
  auto y0 = random_vec(n, 12), bias = random_vec(cols, 13), res = random_vec(n, 14);
  auto g = random_vec(cols, 15), b = random_vec(cols, 16);
  const auto w = random_vec(n, 17);
  const float p = 0.25f;
  auto loss = [&] {
    std::vector<double> y = y0, out(n), mean(rows), rstd(rows);
    ops->residual_layernorm_forward(args(y.data(), bias, res, rows, cols, p, g, b, out.data(), mean.data(), rstd.data()));
    double s = 0;
    for (size_t i = 0; i < n; ++i) s += w[i] * out[i];
    return s;
  };
  std::vector<double> y = y0, out(n), mean(rows), rstd(rows);
  ops->residual_layernorm_forward(args(y.data(), bias, res, rows, cols, p, g, b, out.data(), mean.data(), rstd.data()));
  std::vector<double> dsum(n), dy(n), dbias(cols, 0.0), dg(cols, 0.0), db(cols, 0.0);
  const auto grad = testing::residual_layernorm_grad_args(w.data(), y.data(), g.data(), mean.data(), rstd.data(),
                                                         dsum.data(), dy.data(), dg.data(), db.data(), dbias.data(),
                                                         rows, cols, p, kKey);
  ops->residual_layernorm_backward(grad);
  EXPECT_LT(check_gradient(y0, dy, loss), 1e-7);
  EXPECT_LT(check_gradient(bias, dbias, loss), 1e-7);
  EXPECT_LT(check_gradient(res, dsum, loss), 1e-7);
  EXPECT_LT(check_gradient(g, dg, loss), 1e-7);
  EXPECT_LT(check_gradient(b, db, loss), 1e-7);
}

// 16-bit activations (ResidualLayerNorm::sum_half): y (a GEMM's output) and the sum used at
// their bf16 rounding. Held only in y's kept copy (sum_copy_only: the GEMM wrote only the
// copy, the pass rewrites it, the backward reads it) or, without cast reuse, rounded in y's
// fp32 memory: the same sums, statistics, outputs and gradients, bit for bit; the sums are the
// naive formula on rounded values, rounded; y's fp32 memory is left alone in the copy path.
struct HalfSumRun {
  std::vector<float> y, sums, out, mean, rstd, dsum, dy, dg, db, dbias;
};

HalfSumRun half_sum_run(bool copy, const std::vector<float>& x, const std::vector<float>& w, int k,
                        const std::vector<float>& bias, const std::vector<float>& res, const std::vector<float>& g,
                        const std::vector<float>& b, const std::vector<float>& dout, int rows, int cols, float p) {
  auto ops = cpu::make_ops<float>(GemmMath::kBf16, /*reuse_casts=*/copy);
  EXPECT_EQ(ops->kept_outputs_unwritten(), copy);
  const size_t n = size_t(rows) * cols;
  HalfSumRun r{std::vector<float>(n, -7.0f), std::vector<float>(n), std::vector<float>(n), std::vector<float>(rows),
               std::vector<float>(rows), std::vector<float>(n), std::vector<float>(n), std::vector<float>(cols, 0.f),
               std::vector<float>(cols, 0.f), std::vector<float>(cols, 0.f)};
  if (copy)
    ops->gemm_kept(Trans::kNo, Trans::kNo, rows, cols, k, x.data(), k, w.data(), cols, r.y.data(), cols);
  else
    ops->gemm(Trans::kNo, Trans::kNo, rows, cols, k, 1.0f, x.data(), k, w.data(), cols, 0.0f, r.y.data(), cols);
  auto a = args(r.y.data(), bias, res, rows, cols, p, g, b, r.out.data(), r.mean.data(), r.rstd.data());
  a.sum_half = true;
  a.sum_copy_only = copy;
  ops->residual_layernorm_forward(a);
  // What a GEMM reads at y (its copy, or its fp32 memory rounded) and at dy, through an
  // identity: exact.
  std::vector<float> eye(size_t(cols) * cols, 0.0f), dy_fp32(n, 0.0f);
  for (int c = 0; c < cols; ++c) eye[size_t(c) * cols + c] = 1.0f;
  auto read = [&](const float* v, std::vector<float>* into) {
    ops->gemm(Trans::kNo, Trans::kNo, rows, cols, cols, 1.0f, v, cols, eye.data(), cols, 0.0f, into->data(), cols);
  };
  read(r.y.data(), &r.sums);
  auto grad = testing::residual_layernorm_grad_args(dout.data(), r.y.data(), g.data(), r.mean.data(), r.rstd.data(),
                                                    r.dsum.data(), dy_fp32.data(), r.dg.data(), r.db.data(),
                                                    r.dbias.data(), rows, cols, p, kKey);
  grad.sum_copy_only = copy;
  ops->residual_layernorm_backward(grad);
  read(dy_fp32.data(), &r.dy);
  ops->drop_gemm_operand(dy_fp32.data());
  ops->drop_gemm_operand(r.y.data());
  return r;
}

TEST(ResidualLayerNorm, SixteenBitSumsAreTheSameInTheCopyAndInFp32) {
  const int rows = 7, cols = 40, k = 24;
  const size_t n = size_t(rows) * cols;
  const float p = 0.1f;
  const auto x = testing::cast<float>(random_vec(size_t(rows) * k, 21));
  const auto w = testing::cast<float>(random_vec(size_t(k) * cols, 22));
  const auto bias = testing::cast<float>(random_vec(cols, 23)), res = testing::cast<float>(random_vec(n, 24));
  const auto g = testing::cast<float>(random_vec(cols, 25)), b = testing::cast<float>(random_vec(cols, 26));
  const auto dout = testing::cast<float>(random_vec(n, 27));
  const HalfSumRun c = half_sum_run(true, x, w, k, bias, res, g, b, dout, rows, cols, p);
  const HalfSumRun f = half_sum_run(false, x, w, k, bias, res, g, b, dout, rows, cols, p);
  EXPECT_EQ(c.sums, f.sums);
  EXPECT_EQ(c.out, f.out);
  EXPECT_EQ(c.mean, f.mean);
  EXPECT_EQ(c.rstd, f.rstd);
  EXPECT_EQ(c.dsum, f.dsum);
  EXPECT_EQ(c.dy, f.dy);
  EXPECT_EQ(c.dg, f.dg);
  EXPECT_EQ(c.db, f.db);
  EXPECT_EQ(c.dbias, f.dbias);
  for (float v : c.y) ASSERT_EQ(v, -7.0f) << "y's fp32 memory was written in the copy path";
  // Naive: the bf16 GEMM's fp32 result (bf16 operands, fp32 sums in double here), rounded,
  // plus the bias, dropout, plus the residual, rounded.
  const kern::HalfFormat bf = kern::HalfFormat::kBf16;
  auto rounded = [&](double v) { return double(kern::round_to_half(float(v), bf)); };
  size_t moved = 0;
  for (int r = 0; r < rows; ++r)
    for (int col = 0; col < cols; ++col) {
      const size_t i = size_t(r) * cols + col;
      double acc = 0;
      for (int j = 0; j < k; ++j) acc += rounded(x[size_t(r) * k + j]) * rounded(w[size_t(j) * cols + col]);
      const double z = kern::dropout_keep(kKey, i, p) ? (rounded(acc) + bias[col]) / (1.0 - double(p)) : 0.0;
      const double want = rounded(z + res[i]);
      // One bf16 step of slack: the fp32 sums (GEMM, dropout scale) may round the other way.
      EXPECT_NEAR(c.sums[i], want, 0x1p-7 * std::fabs(want)) << "at " << i;
      EXPECT_EQ(float(rounded(c.sums[i])), c.sums[i]) << "the stored sum is not a bf16 value at " << i;
      moved += double(c.sums[i]) != z + res[i];
    }
  EXPECT_GT(moved, n / 2) << "the sums were not rounded";
  // The LayerNorm normalised the rounded sums.
  for (int r = 0; r < rows; ++r) {
    double m = 0, v = 0;
    for (int col = 0; col < cols; ++col) m += c.sums[size_t(r) * cols + col] / double(cols);
    for (int col = 0; col < cols; ++col) v += std::pow(c.sums[size_t(r) * cols + col] - m, 2) / cols;
    EXPECT_NEAR(c.mean[r], m, 1e-6);
    for (int col = 0; col < cols; ++col)
      EXPECT_NEAR(c.out[size_t(r) * cols + col], (c.sums[size_t(r) * cols + col] - m) / std::sqrt(v + 1e-12) * g[col] + b[col], 1e-5);
  }
}

// The gradient stream in 16 bits (ResidualLayerNormGrad::grad_half, grad_copy_only): d(out)
// held as its kept copy (cast from fp32, as the model casts the heads' d(hidden)), d(sum)
// written only into its copy, the layer input's gradient added into that copy
// (gemm_accumulate_kept), and widened out at the end (widen_kept); or, without cast reuse, d(out)
// rounded as read, d(sum) rounded in fp32 memory, the GEMM adding in fp32 and the end rounded
// in place (round_to_gemm_half). The same bits either way, and the copy path never touches
// d(out)'s or d(sum)'s fp32 memory before the end.
struct HalfGradRun {
  std::vector<float> dsum, dy, dg, db, dbias, end;
  bool fp32_untouched = true;
};

HalfGradRun half_grad_run(bool copy, const std::vector<float>& sum, const std::vector<float>& g,
                          const std::vector<float>& mean, const std::vector<float>& rstd,
                          const std::vector<float>& dout, const std::vector<float>& a, const std::vector<float>& w,
                          int k, int rows, int cols, float p) {
  auto ops = cpu::make_ops<float>(GemmMath::kBf16, /*reuse_casts=*/copy);
  const size_t n = size_t(rows) * cols;
  HalfGradRun r{std::vector<float>(n), std::vector<float>(n), std::vector<float>(cols, 0.f),
                std::vector<float>(cols, 0.f), std::vector<float>(cols, 0.f), std::vector<float>(n)};
  std::vector<float> dout_mem = dout, dsum_mem(n, -7.0f), dy(n, 0.0f);
  if (copy) {
    ops->keep_gemm_operand(dout_mem.data(), n);
    std::fill(dout_mem.begin(), dout_mem.end(), std::nanf(""));  // only the copy may be read
  }
  auto grad = testing::residual_layernorm_grad_args(dout_mem.data(), sum.data(), g.data(), mean.data(), rstd.data(),
                                                    dsum_mem.data(), dy.data(), r.dg.data(), r.db.data(),
                                                    r.dbias.data(), rows, cols, p, kKey);
  grad.grad_half = true;
  grad.grad_copy_only = copy;
  ops->residual_layernorm_backward(grad);
  std::vector<float> eye(size_t(cols) * cols, 0.0f);
  for (int c = 0; c < cols; ++c) eye[size_t(c) * cols + c] = 1.0f;
  auto read = [&](const float* v, std::vector<float>* into) {  // as a GEMM reads it: exact
    ops->gemm(Trans::kNo, Trans::kNo, rows, cols, cols, 1.0f, v, cols, eye.data(), cols, 0.0f, into->data(), cols);
  };
  read(dsum_mem.data(), &r.dsum);
  read(dy.data(), &r.dy);
  if (copy) {
    ops->gemm_accumulate_kept(Trans::kNo, Trans::kNo, rows, cols, k, a.data(), k, w.data(), cols, dsum_mem.data(),
                              cols);
    for (float v : dsum_mem) r.fp32_untouched = r.fp32_untouched && v == -7.0f;
    ops->widen_kept(dsum_mem.data(), n);
  } else {
    ops->gemm(Trans::kNo, Trans::kNo, rows, cols, k, 1.0f, a.data(), k, w.data(), cols, 1.0f, dsum_mem.data(), cols);
    ops->round_to_gemm_half(dsum_mem.data(), n);
  }
  r.end = dsum_mem;
  return r;
}

TEST(ResidualLayerNorm, SixteenBitGradientStreamIsTheSameInTheCopyAndInFp32) {
  const int rows = 6, cols = 36, k = 20;
  const size_t n = size_t(rows) * cols;
  const float p = 0.1f;
  const auto sum = testing::cast<float>(random_vec(n, 31)), g = testing::cast<float>(random_vec(cols, 32));
  const auto beta = testing::cast<float>(random_vec(cols, 33)), dout = testing::cast<float>(random_vec(n, 34));
  const auto a = testing::cast<float>(random_vec(size_t(rows) * k, 35));
  const auto w = testing::cast<float>(random_vec(size_t(k) * cols, 36));
  std::vector<float> out(n), mean(rows), rstd(rows);
  cpu::make_ops<float>()->layernorm_forward(sum.data(), g.data(), beta.data(), out.data(), mean.data(), rstd.data(),
                                            rows, cols, 1e-12f);
  const HalfGradRun c = half_grad_run(true, sum, g, mean, rstd, dout, a, w, k, rows, cols, p);
  const HalfGradRun f = half_grad_run(false, sum, g, mean, rstd, dout, a, w, k, rows, cols, p);
  EXPECT_TRUE(c.fp32_untouched) << "d(sum)'s fp32 memory was written in the copy path";
  EXPECT_EQ(c.dsum, f.dsum);
  EXPECT_EQ(c.dy, f.dy);
  EXPECT_EQ(c.dg, f.dg);
  EXPECT_EQ(c.db, f.db);
  EXPECT_EQ(c.dbias, f.dbias);
  EXPECT_EQ(c.end, f.end);
  // Naive, in double: the LayerNorm's dx of the rounded d(out), rounded; then plus the bf16
  // GEMM's product, rounded. One bf16 step of slack where fp32 sums may round the other way.
  const kern::HalfFormat bf = kern::HalfFormat::kBf16;
  auto rounded = [&](double v) { return double(kern::round_to_half(float(v), bf)); };
  size_t moved = 0;
  for (int r = 0; r < rows; ++r) {
    double mg = 0, mgx = 0;
    for (int col = 0; col < cols; ++col) {
      const size_t i = size_t(r) * cols + col;
      const double xhat = (sum[i] - double(mean[r])) * rstd[r];
      mg += rounded(dout[i]) * g[col] / cols;
      mgx += rounded(dout[i]) * g[col] * xhat / cols;
    }
    for (int col = 0; col < cols; ++col) {
      const size_t i = size_t(r) * cols + col;
      const double xhat = (sum[i] - double(mean[r])) * rstd[r];
      const double dx = rstd[r] * (rounded(dout[i]) * g[col] - mg - xhat * mgx);
      EXPECT_NEAR(c.dsum[i], rounded(dx), 0x1p-7 * std::fabs(dx) + 1e-6) << "d(sum) at " << i;
      EXPECT_EQ(float(rounded(c.dsum[i])), c.dsum[i]) << "d(sum) is not a bf16 value at " << i;
      double acc = c.dsum[i];
      for (int j = 0; j < k; ++j) acc += rounded(a[size_t(r) * k + j]) * rounded(w[size_t(j) * cols + col]);
      EXPECT_NEAR(c.end[i], rounded(acc), 0x1p-7 * std::fabs(acc) + 1e-6) << "the stream's end at " << i;
      EXPECT_EQ(float(rounded(c.end[i])), c.end[i]) << "the stream's end is not a bf16 value at " << i;
      moved += double(c.dsum[i]) != float(dx);
    }
  }
  EXPECT_GT(moved, n / 2) << "d(sum) was not rounded";
}

}  // namespace
}  // namespace lansbert
