// Ops::keep_gemm_operand on the CPU backend: a kept span is rounded once and serves every
// GEMM operand inside it (whole, transposed, or as batched head slices), with the same bits
// as rounding at each use; the conversion counter says how much rounding ran, so a keep that
// is ignored (or a copy served for an operand outside the span, or a stale one) fails here.
// And the span registry (KeptOperands) on its own.
#include <gtest/gtest.h>

#include <cstring>

#include "attention_batch.h"
#include "fd.h"
#include "lansbert/backend/cpu_ops.h"
#include "lansbert/backend/kept_operands.h"

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
    if (hold) ops.keep_gemm_operand(d_ctx.data(), d_ctx.size());
    ops.gemm_batched(Trans::kNo, Trans::kYes, S, S, D, 1.f, d_ctx.data(), H, v.data(), H, 0.f, d_probs.data(), S, qk);
    ops.gemm_batched(Trans::kYes, Trans::kNo, S, D, S, 1.f, probs.data(), S, d_ctx.data(), H, 0.f, d_v.data(), H, pv);
    if (hold) ops.drop_gemm_operand(d_ctx.data());
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

// Two kept spans at once: the weights and dy; only x is rounded by the GEMMs themselves.
TEST(GemmOperandHold, TwoKeptSpansServeTogether) {
  const int n = 9, in = 6, out = 5;
  const auto dy = random_floats(size_t(n) * out, 9), x = random_floats(size_t(n) * in, 10),
             w = random_floats(size_t(out) * in, 11);
  auto plain = cpu::make_ops<float>(GemmMath::kBf16), held = cpu::make_ops<float>(GemmMath::kBf16);
  const TwoGemms want = backward_gemms(*plain, dy, x, w, n, in, out);
  held->keep_gemm_operand(w.data(), w.size());
  TwoGemms got;
  {
    HeldGemmOperand<float> hold(*held, dy.data(), dy.size());
    const size_t before = held->gemm_operand_conversions();
    got = backward_gemms(*held, dy, x, w, n, in, out);
    EXPECT_EQ(held->gemm_operand_conversions() - before, size_t(n * in));
  }
  held->drop_gemm_operand(w.data());
  EXPECT_TRUE(same_bits(got.dx, want.dx));
  EXPECT_TRUE(same_bits(got.dw, want.dw));
}

// Keeping a span again says its contents changed: the copy is rounded anew.
TEST(GemmOperandHold, KeepingAgainRoundsTheNewContents) {
  const int n = 8, in = 5, out = 6;
  auto dy = random_floats(size_t(n) * out, 12);
  const auto x = random_floats(size_t(n) * in, 13), w = random_floats(size_t(out) * in, 14);
  auto plain = cpu::make_ops<float>(GemmMath::kBf16), kept = cpu::make_ops<float>(GemmMath::kBf16);
  kept->keep_gemm_operand(dy.data(), dy.size());
  backward_gemms(*kept, dy, x, w, n, in, out);
  for (float& v : dy) v = 2.5f * v + 0.125f;
  kept->keep_gemm_operand(dy.data(), dy.size());
  const TwoGemms got = backward_gemms(*kept, dy, x, w, n, in, out), want = backward_gemms(*plain, dy, x, w, n, in, out);
  kept->drop_gemm_operand(dy.data());
  EXPECT_TRUE(same_bits(got.dx, want.dx));
  EXPECT_TRUE(same_bits(got.dw, want.dw));
}

TEST(GemmOperandHold, ReuseOffAndFp32ConvertNothingExtra) {
  const int n = 7, in = 4, out = 3;
  const auto dy = random_floats(size_t(n) * out, 15), x = random_floats(size_t(n) * in, 16),
             w = random_floats(size_t(out) * in, 17);
  auto off = cpu::make_ops<float>(GemmMath::kBf16, /*reuse_casts=*/false);
  {
    HeldGemmOperand<float> hold(*off, dy.data(), dy.size());
    backward_gemms(*off, dy, x, w, n, in, out);
  }
  EXPECT_EQ(off->gemm_operand_conversions(), size_t(2 * n * out + out * in + n * in));
  auto fp32 = cpu::make_ops<float>();
  {
    HeldGemmOperand<float> hold(*fp32, dy.data(), dy.size());
    backward_gemms(*fp32, dy, x, w, n, in, out);
  }
  EXPECT_EQ(fp32->gemm_operand_conversions(), 0u);
}

// A span kept with its conversion at hand (the optimizer's weight copy) is read from that copy:
// no rounding runs, and the GEMMs see the bits rounding would give. A copy in the other 16-bit
// format is not the GEMMs' and is ignored (the span is rounded); so is one under fp32 math.
TEST(GemmOperandHold, ConvertedSpanIsReadWithoutRounding) {
  const int n = 9, in = 6, out = 5;
  const auto dy = random_floats(size_t(n) * out, 21), x = random_floats(size_t(n) * in, 22),
             w = random_floats(size_t(out) * in, 23);
  for (GemmMath math : {GemmMath::kBf16, GemmMath::kFp16}) {
    const kern::HalfFormat mine = gemm_half_format(math);
    const kern::HalfFormat other = math == GemmMath::kBf16 ? kern::HalfFormat::kFp16 : kern::HalfFormat::kBf16;
    auto to_half = [&](kern::HalfFormat f) {
      std::vector<uint16_t> h(w.size());
      for (size_t i = 0; i < w.size(); ++i) h[i] = kern::float_to_half(w[i], f);
      return h;
    };
    const std::vector<uint16_t> copy = to_half(mine), wrong = to_half(other);
    auto plain = cpu::make_ops<float>(math), ops = cpu::make_ops<float>(math);
    const TwoGemms want = backward_gemms(*plain, dy, x, w, n, in, out);
    ops->keep_converted_gemm_operand(w.data(), w.size(), copy.data(), mine);
    TwoGemms got = backward_gemms(*ops, dy, x, w, n, in, out);
    EXPECT_TRUE(same_bits(got.dx, want.dx)) << gemm_math_name(math);
    EXPECT_TRUE(same_bits(got.dw, want.dw)) << gemm_math_name(math);
    EXPECT_EQ(ops->gemm_operand_conversions(), size_t(2 * n * out + n * in)) << "w was rounded";
    // The copy is what is read: a copy of other weights gives other results.
    std::vector<uint16_t> shifted = copy;
    for (uint16_t& h : shifted) h = kern::float_to_half(0.5f * kern::half_to_float(h, mine), mine);
    ops->keep_converted_gemm_operand(w.data(), w.size(), shifted.data(), mine);
    EXPECT_FALSE(same_bits(backward_gemms(*ops, dy, x, w, n, in, out).dx, want.dx));
    // The other format: rounded from w as keep_gemm_operand does.
    const size_t before = ops->gemm_operand_conversions();
    ops->keep_converted_gemm_operand(w.data(), w.size(), wrong.data(), other);
    got = backward_gemms(*ops, dy, x, w, n, in, out);
    EXPECT_TRUE(same_bits(got.dx, want.dx)) << gemm_math_name(math);
    EXPECT_EQ(ops->gemm_operand_conversions() - before, size_t(out * in + 2 * n * out + n * in));
    ops->drop_gemm_operand(w.data());
  }
  auto fp32 = cpu::make_ops<float>();
  const std::vector<uint16_t> copy(w.size(), 0);  // would zero the products if it were read
  fp32->keep_converted_gemm_operand(w.data(), w.size(), copy.data(), kern::HalfFormat::kBf16);
  auto ref = cpu::make_ops<float>();
  EXPECT_TRUE(same_bits(backward_gemms(*fp32, dy, x, w, n, in, out).dx, backward_gemms(*ref, dy, x, w, n, in, out).dx));
  EXPECT_EQ(fp32->gemm_operand_conversions(), 0u);
}

TEST(GemmOperandHold, KeptSpansMayNotOverlap) {
  auto ops = cpu::make_ops<float>();
  const auto a = random_floats(12, 7);
  ops->keep_gemm_operand(a.data(), 8);
  ops->keep_gemm_operand(a.data(), 6);  // the same span again (new contents): fine
  ops->keep_gemm_operand(a.data() + 6, 6);  // right after it: fine
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_DEATH(ops->keep_gemm_operand(a.data() + 4, 4), "overlaps");
  EXPECT_DEATH(ops->keep_gemm_operand(a.data() + 1, 2), "overlaps");
  ops->drop_gemm_operand(a.data());
  ops->keep_gemm_operand(a.data() + 1, 2);  // fine once the first is dropped
}

TEST(KeptOperands, LookupStaysInsideTheSpan) {
  float buf[16] = {};
  KeptOperands<float, int> kept;
  size_t off = 99;
  EXPECT_EQ(kept.find(buf, 4, &off), nullptr);  // nothing kept
  kept.keep(buf + 2, 10) = 7;                   // [2, 12)
  kept.keep(buf + 12, 2) = 8;                   // [12, 14)
  const int* s = kept.find(buf + 2, 10, &off);
  ASSERT_NE(s, nullptr);
  EXPECT_EQ(*s, 7);
  EXPECT_EQ(off, 0u);
  s = kept.find(buf + 5, 7, &off);
  ASSERT_NE(s, nullptr);
  EXPECT_EQ(off, 3u);
  EXPECT_EQ(kept.find(buf + 5, 8, &off), nullptr);  // runs into the next span
  EXPECT_EQ(kept.find(buf + 1, 2, &off), nullptr);  // starts before
  s = kept.find(buf + 13, 1, &off);
  ASSERT_NE(s, nullptr);
  EXPECT_EQ(*s, 8);
  EXPECT_EQ(off, 1u);
  EXPECT_EQ(kept.find(buf + 14, 1, &off), nullptr);
  EXPECT_EQ(kept.find(reinterpret_cast<const float*>(reinterpret_cast<const char*>(buf + 3) + 1), 1, &off), nullptr);
  kept.drop(buf + 2);
  EXPECT_EQ(kept.find(buf + 2, 10, &off), nullptr);
  EXPECT_EQ(kept.kept(), 1u);
  EXPECT_EQ(kept.keep(buf + 2, 10), 7);  // the store stays with its address
}

// Addresses that come and go one at a time are freed beyond the spare; a model's buffers,
// all kept at once in the forward and dropped in the backward, are not (their copies would
// otherwise be reallocated every step).
TEST(KeptOperands, UnusedStoresAreHandedBackBeyondTheSpare) {
  std::vector<float> buf(400);
  KeptOperands<float, int> kept;
  for (size_t i = 0; i < 100; ++i) {
    kept.keep(buf.data() + i, 1);
    kept.drop(buf.data() + i);
  }
  kept.keep(buf.data() + 150, 10);
  EXPECT_EQ(kept.take_unused().size(), 100u);
  EXPECT_EQ(kept.take_unused().size(), 0u);
  size_t off;
  EXPECT_NE(kept.find(buf.data() + 155, 2, &off), nullptr);  // the kept one survives

  KeptOperands<float, int> model;
  for (int step = 0; step < 3; ++step) {
    for (size_t i = 0; i < 100; ++i) model.keep(buf.data() + 200 + i, 1);  // forward
    for (size_t i = 0; i < 100; ++i) model.drop(buf.data() + 200 + i);     // backward
    EXPECT_EQ(model.take_unused().size(), 0u) << step;
  }
}

}  // namespace
}  // namespace lansbert
