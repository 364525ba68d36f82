// Ops::hold_gemm_operand on the CPU backend: a held span is rounded once and serves every
// GEMM operand inside it (whole, transposed, or as batched head slices), with the same bits
// as rounding at each use; the conversion counter says how much rounding ran, so a hold that
// is ignored (or a copy served for an operand outside the span) fails here.
#include <gtest/gtest.h>

#include <cstring>

#include "attention_batch.h"
#include "fd.h"
#include "lansbert/backend/cpu_ops.h"

namespace lansbert {
namespace {

bool same_bits(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

std::vector<float> random_floats(size_t n, uint64_t seed) { return testing::cast<float>(testing::random_vec(n, seed)); }

// A backward's two GEMMs on dy [n, out]: dx = dy w, dw += dy^T x.
struct TwoGemms {
  std::vector<float> dx, dw;
};
TwoGemms backward_gemms(Ops<float>& ops, const std::vector<float>& dy, const std::vector<float>& x,
                        const std::vector<float>& w, int n, int in, int out) {
  TwoGemms r{std::vector<float>(size_t(n) * in), std::vector<float>(size_t(out) * in, 0.25f)};
  ops.gemm(Trans::kNo, Trans::kNo, n, in, out, 1.f, dy.data(), out, w.data(), in, 0.f, r.dx.data(), in);
  ops.gemm(Trans::kYes, Trans::kNo, out, in, n, 1.f, dy.data(), out, x.data(), in, 1.f, r.dw.data(), in);
  return r;
}

TEST(GemmOperandHold, HeldSpanIsRoundedOnceWithTheSameBits) {
  const int n = 13, in = 7, out = 11;
  const auto dy = random_floats(size_t(n) * out, 1), x = random_floats(size_t(n) * in, 2),
             w = random_floats(size_t(out) * in, 3);
  for (GemmMath math : {GemmMath::kBf16, GemmMath::kFp16}) {
    auto plain = cpu::make_ops<float>(math), held = cpu::make_ops<float>(math);
    const TwoGemms want = backward_gemms(*plain, dy, x, w, n, in, out);
    EXPECT_EQ(plain->gemm_operand_conversions(), size_t(2 * n * out + out * in + n * in));
    TwoGemms got;
    {
      HeldGemmOperand<float> hold(*held, dy.data(), dy.size());
      got = backward_gemms(*held, dy, x, w, n, in, out);
    }
    EXPECT_TRUE(same_bits(got.dx, want.dx)) << gemm_math_name(math);
    EXPECT_TRUE(same_bits(got.dw, want.dw)) << gemm_math_name(math);
    EXPECT_EQ(held->gemm_operand_conversions(), size_t(n * out + out * in + n * in)) << gemm_math_name(math);
    // Released: the next use rounds again.
    const size_t before = held->gemm_operand_conversions();
    backward_gemms(*held, dy, x, w, n, in, out);
    EXPECT_EQ(held->gemm_operand_conversions() - before, size_t(2 * n * out + out * in + n * in));
  }
}

// Attention's d(ctx): head slices of a [B*S, H] tensor as batched operands, read both as A
// and as B, from a held span that starts at the tensor.
TEST(GemmOperandHold, BatchedHeadSlicesReadTheHeldCopy) {
  const int B = 2, A = 3, S = 5, D = 4, H = A * D;
  const auto d_ctx = random_floats(size_t(B) * S * H, 4), v = random_floats(size_t(B) * S * H, 5),
             probs = random_floats(size_t(B) * A * S * S, 6);
  const GemmBatch qk = testing::attention_scores_batch(B, A, S, D);
  GemmBatch pv;
  pv.outer = B, pv.inner = A;
  pv.a_outer = int64_t(A) * S * S, pv.a_inner = int64_t(S) * S;
  pv.b_outer = pv.c_outer = int64_t(S) * H;
  pv.b_inner = pv.c_inner = D;
  auto run = [&](Ops<float>& ops, bool hold) {
    std::vector<float> d_probs(probs.size()), d_v(v.size());
    if (hold) ops.hold_gemm_operand(d_ctx.data(), d_ctx.size(), HoldSlot::kOperand);
    ops.gemm_batched(Trans::kNo, Trans::kYes, S, S, D, 1.f, d_ctx.data(), H, v.data(), H, 0.f, d_probs.data(), S, qk);
    ops.gemm_batched(Trans::kYes, Trans::kNo, S, D, S, 1.f, probs.data(), S, d_ctx.data(), H, 0.f, d_v.data(), H, pv);
    if (hold) ops.release_gemm_operand(HoldSlot::kOperand);
    return std::pair{d_probs, d_v};
  };
  auto plain = cpu::make_ops<float>(GemmMath::kBf16), held = cpu::make_ops<float>(GemmMath::kBf16);
  const auto want = run(*plain, false), got = run(*held, true);
  EXPECT_TRUE(same_bits(got.first, want.first));
  EXPECT_TRUE(same_bits(got.second, want.second));
  // Plain: d_ctx twice; held: once (each extent covers its whole tensor); v and the
  // probabilities once either way.
  EXPECT_EQ(plain->gemm_operand_conversions(), 2 * d_ctx.size() + v.size() + probs.size());
  EXPECT_EQ(held->gemm_operand_conversions(), d_ctx.size() + v.size() + probs.size());
}

// Both slots at once: the weights (kWeights) and dy (kOperand) held, only x is rounded by
// the GEMMs themselves.
TEST(GemmOperandHold, WeightAndOperandSlotsServeTogether) {
  const int n = 9, in = 6, out = 5;
  const auto dy = random_floats(size_t(n) * out, 9), x = random_floats(size_t(n) * in, 10),
             w = random_floats(size_t(out) * in, 11);
  auto plain = cpu::make_ops<float>(GemmMath::kBf16), held = cpu::make_ops<float>(GemmMath::kBf16);
  const TwoGemms want = backward_gemms(*plain, dy, x, w, n, in, out);
  held->hold_gemm_operand(w.data(), w.size(), HoldSlot::kWeights);
  TwoGemms got;
  {
    HeldGemmOperand<float> hold(*held, dy.data(), dy.size());
    const size_t before = held->gemm_operand_conversions();
    got = backward_gemms(*held, dy, x, w, n, in, out);
    EXPECT_EQ(held->gemm_operand_conversions() - before, size_t(n * in));
  }
  held->release_gemm_operand(HoldSlot::kWeights);
  EXPECT_TRUE(same_bits(got.dx, want.dx));
  EXPECT_TRUE(same_bits(got.dw, want.dw));
}

TEST(GemmOperandHold, Fp32ConvertsNothingAndOneSpanAtATime) {
  auto ops = cpu::make_ops<float>();
  const auto a = random_floats(12, 7), b = random_floats(12, 8);
  std::vector<float> c(9);
  ops->hold_gemm_operand(a.data(), a.size(), HoldSlot::kOperand);
  ops->gemm(Trans::kNo, Trans::kNo, 3, 3, 4, 1.f, a.data(), 4, b.data(), 3, 0.f, c.data(), 3);
  EXPECT_EQ(ops->gemm_operand_conversions(), 0u);
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_DEATH(ops->hold_gemm_operand(b.data(), b.size(), HoldSlot::kOperand), "already held");
  ops->release_gemm_operand(HoldSlot::kOperand);
  ops->hold_gemm_operand(b.data(), b.size(), HoldSlot::kOperand);  // fine after the release
  ops->release_gemm_operand(HoldSlot::kOperand);
}

TEST(GemmOperandHold, SpanLookupStaysInsideTheSpan) {
  float buf[16] = {};
  HeldOperandSpan<float> span;
  size_t off = 99;
  EXPECT_FALSE(span.find(buf, 4, &off));  // nothing held
  span.hold(buf + 2, 10);                 // [2, 12)
  EXPECT_TRUE(span.find(buf + 2, 10, &off));
  EXPECT_EQ(off, 0u);
  EXPECT_TRUE(span.find(buf + 5, 7, &off));
  EXPECT_EQ(off, 3u);
  EXPECT_FALSE(span.find(buf + 5, 8, &off));  // runs one past the end
  EXPECT_FALSE(span.find(buf + 1, 2, &off));  // starts before
  EXPECT_FALSE(span.find(buf + 12, 1, &off));
  EXPECT_FALSE(span.find(reinterpret_cast<const float*>(reinterpret_cast<const char*>(buf + 3) + 1), 1, &off));
  span.release();
  EXPECT_FALSE(span.find(buf + 2, 10, &off));
}

}  // namespace
}  // namespace lansbert
