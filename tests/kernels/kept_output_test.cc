// The attention ops that produce a kept GEMM operand directly (Ops::softmax_dropout_forward_kept,
// Ops::softmax_backward_kept) on the CPU backend: a GEMM reading the kept output sees the bits
// of the plain op followed by keep_gemm_operand; with 16-bit GEMMs nothing is cast for it and
// the fp32 output stays unwritten; with fp32 GEMMs (or reuse off) the fp32 output is written.
#include <gtest/gtest.h>

#include <algorithm>
#include <utility>
#include <cmath>
#include <cstring>
#include <limits>
#include <string>

#include "fd.h"
#include "lansbert/backend/cpu_ops.h"

namespace lansbert {
namespace {

constexpr int kB = 2, kA = 3, kS = 9, kD = 4;
constexpr size_t kN = size_t(kB) * kA * kS * kS;
constexpr float kScale = 0.41f, kDrop = 0.2f;
const RngKey kKey{11, 12};

std::vector<float> floats(size_t n, uint64_t seed) { return testing::cast<float>(testing::random_vec(n, seed)); }

std::vector<int32_t> key_mask() {
  std::vector<int32_t> m(kB * kS, 1);
  m[6] = m[7] = m[8] = 0;  // sequence 0 has six real tokens
  return m;
}

// y[B*A*S, D] = x [B*A*S, S] * w [S, D]: a GEMM that reads all of x.
std::vector<float> read_by_gemm(Ops<float>& ops, const float* x, const std::vector<float>& w) {
  std::vector<float> y(size_t(kB) * kA * kS * kD);
  ops.gemm(Trans::kNo, Trans::kNo, kB * kA * kS, kD, kS, 1.f, x, kS, w.data(), kD, 0.f, y.data(), kD);
  return y;
}

bool same_bits(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

bool untouched(const std::vector<float>& x) {
  for (float v : x)
    if (!std::isnan(v)) return false;
  return true;
}

TEST(KeptOutput, SoftmaxDropoutForwardWritesTheCopyOnly) {
  const auto scores = floats(kN, 1), w = floats(size_t(kS) * kD, 2);
  const auto mask = key_mask();
  for (GemmMath math : {GemmMath::kBf16, GemmMath::kFp16, GemmMath::kFp32}) {
    auto plain = cpu::make_ops<float>(math), kept = cpu::make_ops<float>(math);
    std::vector<float> p1(kN), pd1(kN), p2(kN), pd2(kN, std::numeric_limits<float>::quiet_NaN());
    plain->softmax_dropout_forward(scores.data(), mask.data(), p1.data(), pd1.data(), kB, kA, kS, kScale, kDrop, kKey);
    plain->keep_gemm_operand(pd1.data(), kN);
    kept->softmax_dropout_forward_kept(scores.data(), mask.data(), p2.data(), pd2.data(), kB, kA, kS, kScale, kDrop,
                                       kKey);
    EXPECT_TRUE(same_bits(p1, p2)) << gemm_math_name(math);
    EXPECT_TRUE(same_bits(read_by_gemm(*plain, pd1.data(), w), read_by_gemm(*kept, pd2.data(), w)))
        << gemm_math_name(math);
    if (math == GemmMath::kFp32) {
      EXPECT_TRUE(same_bits(pd1, pd2)) << "fp32 GEMMs read the fp32 output: it must be written";
      continue;
    }
    EXPECT_TRUE(untouched(pd2)) << gemm_math_name(math) << ": the fp32 output was written";
    EXPECT_EQ(plain->gemm_operand_conversions() - kept->gemm_operand_conversions(), kN) << gemm_math_name(math);
    kept->drop_gemm_operand(pd2.data());
  }
}

TEST(KeptOutput, SoftmaxBackwardWritesTheCopyOnly) {
  const auto dprobs = floats(kN, 3), w = floats(size_t(kS) * kD, 4);
  const auto mask = key_mask();
  for (GemmMath math : {GemmMath::kBf16, GemmMath::kFp16}) {
    for (float p : {kDrop, 0.f}) {
      auto plain = cpu::make_ops<float>(math), kept = cpu::make_ops<float>(math);
      std::vector<float> scores = floats(kN, 5), probs(kN);
      plain->softmax_forward(scores.data(), mask.data(), probs.data(), kB, kA, kS, kScale);
      std::vector<float> dp1 = dprobs, dp2 = dprobs, ds1(kN), ds2(kN, std::numeric_limits<float>::quiet_NaN());
      if (p > 0)
        plain->dropout_softmax_backward(dp1.data(), probs.data(), ds1.data(), kB, kA, kS, kScale, p, kKey);
      else
        plain->softmax_backward(dp1.data(), probs.data(), ds1.data(), kB, kA, kS, kScale);
      plain->keep_gemm_operand(ds1.data(), kN);
      kept->softmax_backward_kept(dp2.data(), probs.data(), ds2.data(), kB, kA, kS, kScale, p, kKey);
      EXPECT_TRUE(same_bits(read_by_gemm(*plain, ds1.data(), w), read_by_gemm(*kept, ds2.data(), w)))
          << gemm_math_name(math) << " p=" << p;
      EXPECT_TRUE(untouched(ds2)) << gemm_math_name(math) << " p=" << p;
      EXPECT_EQ(plain->gemm_operand_conversions() - kept->gemm_operand_conversions(), kN);
    }
  }
}

TEST(KeptOutput, GeluForwardWritesTheCopyOnly) {
  const int rows = 11, cols = 13;
  const size_t n = size_t(rows) * cols;
  const auto pre = floats(n, 7), w = floats(size_t(cols) * kD, 9);
  for (GemmMath math : {GemmMath::kBf16, GemmMath::kFp16}) {
    auto plain = cpu::make_ops<float>(math), kept = cpu::make_ops<float>(math);
    std::vector<float> act1(n), act2(n, std::numeric_limits<float>::quiet_NaN()), pre2 = pre;
    plain->gelu_forward(pre.data(), act1.data(), n);
    plain->keep_gemm_operand(act1.data(), n);
    kept->gelu_forward_kept(pre.data(), act2.data(), n);
    std::vector<float> y1(size_t(rows) * kD), y2(y1.size()), y3(y1.size());
    plain->gemm(Trans::kNo, Trans::kNo, rows, kD, cols, 1.f, act1.data(), cols, w.data(), kD, 0.f, y1.data(), kD);
    kept->gemm(Trans::kNo, Trans::kNo, rows, kD, cols, 1.f, act2.data(), cols, w.data(), kD, 0.f, y2.data(), kD);
    EXPECT_TRUE(same_bits(y1, y2)) << gemm_math_name(math);
    EXPECT_TRUE(untouched(act2)) << gemm_math_name(math);
    EXPECT_EQ(plain->gemm_operand_conversions() - kept->gemm_operand_conversions(), n);
    kept->drop_gemm_operand(act2.data());
    // The output at the input's address (the model's layout without fp32 GELU memory): the
    // input keeps its fp32 values, GEMMs given the address read the GELU's copy.
    kept->gelu_forward_kept(pre2.data(), pre2.data(), n);
    EXPECT_TRUE(same_bits(pre2, pre)) << gemm_math_name(math);
    kept->gemm(Trans::kNo, Trans::kNo, rows, kD, cols, 1.f, pre2.data(), cols, w.data(), kD, 0.f, y3.data(), kD);
    EXPECT_TRUE(same_bits(y1, y3)) << gemm_math_name(math);
    kept->drop_gemm_operand(pre2.data());
    plain->drop_gemm_operand(act1.data());
  }
}

// The FFN's first layer as the model runs it (the bias in the GEMM's epilogue, then the GELU)
// gives the bits of the GEMM followed by the fused bias + GELU pass it replaced: the same
// pre-activation (which the GELU backward reads) and the same activation.
TEST(KeptOutput, FfnBiasInTheGemmEpilogueGivesTheFusedPassBits) {
  const int rows = 9, k = 16, cols = 24;
  const auto x = floats(size_t(rows) * k, 10), w = floats(size_t(cols) * k, 11), bias = floats(cols, 12);
  for (GemmMath math : {GemmMath::kFp32, GemmMath::kBf16}) {
    auto ops = cpu::make_ops<float>(math, false);
    std::vector<float> pre1(size_t(rows) * cols), act1(pre1.size()), pre2(pre1.size()), act2(pre1.size());
    ops->gemm(Trans::kNo, Trans::kYes, rows, cols, k, 1.f, x.data(), k, w.data(), k, 0.f, pre1.data(), cols);
    ops->bias_gelu_forward(pre1.data(), bias.data(), act1.data(), rows, cols);
    ops->gemm_bias(Trans::kNo, Trans::kYes, rows, cols, k, x.data(), k, w.data(), k, bias.data(), pre2.data(), cols);
    ops->gelu_forward(pre2.data(), act2.data(), pre2.size());
    EXPECT_TRUE(same_bits(pre1, pre2)) << gemm_math_name(math);
    EXPECT_TRUE(same_bits(act1, act2)) << gemm_math_name(math);
  }
}

// The ops whose output is also read in fp32 write it as before and keep it with a copy
// written in the same pass (the bias sums: their input): the fp32 output and the bias gradients equal the plain op's, a
// GEMM over the output sees the bits of casting it, and nothing is cast for it. The
// dropout-bias and GELU backwards (ops 1 to 3), whose outputs only GEMMs read once their bias
// sums are taken, write the copy alone: their fp32 outputs stay untouched.
// The GELU backward as the model calls it, its output at its input's address: the input
// keeps its values (only the copy is written), the bias gradients and the GEMM over the
// address are the plain op's; with fp32 GEMMs or without cast reuse both GELU ops write their
// fp32 outputs as the plain ops do.
TEST(KeptOutput, GeluOpsInPlaceAndWithoutReuse) {
  const int rows = 10, cols = 12;
  const size_t n = size_t(rows) * cols;
  const auto dact = floats(n, 41), pre = floats(n, 42), w = floats(size_t(cols) * kD, 43);
  auto plain = cpu::make_ops<float>(GemmMath::kBf16), kept = cpu::make_ops<float>(GemmMath::kBf16);
  std::vector<float> d1 = dact, d2 = dact, db1(cols, 0.5f), db2(cols, 0.5f);
  plain->bias_gelu_backward(d1.data(), pre.data(), d1.data(), db1.data(), rows, cols);
  plain->keep_gemm_operand(d1.data(), n);
  kept->bias_gelu_backward_kept(d2.data(), pre.data(), d2.data(), db2.data(), rows, cols);
  EXPECT_TRUE(same_bits(d2, dact)) << "the fp32 output was written over the input";
  EXPECT_TRUE(same_bits(db1, db2));
  std::vector<float> z1(size_t(rows) * kD), z2(z1.size());
  plain->gemm(Trans::kNo, Trans::kNo, rows, kD, cols, 1.f, d1.data(), cols, w.data(), kD, 0.f, z1.data(), kD);
  kept->gemm(Trans::kNo, Trans::kNo, rows, kD, cols, 1.f, d2.data(), cols, w.data(), kD, 0.f, z2.data(), kD);
  EXPECT_TRUE(same_bits(z1, z2));
  for (auto [math, reuse] : {std::pair{GemmMath::kFp32, true}, std::pair{GemmMath::kBf16, false}}) {
    auto ref = cpu::make_ops<float>(math, reuse), ops = cpu::make_ops<float>(math, reuse);
    ASSERT_FALSE(ops->kept_outputs_unwritten());
    std::vector<float> a1(n), a2(n), g1(n), g2(n), b1(cols, 0.f), b2(cols, 0.f);
    ref->gelu_forward(pre.data(), a1.data(), n);
    ops->gelu_forward_kept(pre.data(), a2.data(), n);
    ref->bias_gelu_backward(dact.data(), pre.data(), g1.data(), b1.data(), rows, cols);
    ops->bias_gelu_backward_kept(dact.data(), pre.data(), g2.data(), b2.data(), rows, cols);
    const std::string what = std::string(gemm_math_name(math)) + (reuse ? "" : " without reuse");
    EXPECT_TRUE(same_bits(a1, a2)) << what;
    EXPECT_TRUE(same_bits(g1, g2) && same_bits(b1, b2)) << what;
  }
}

TEST(KeptOutput, WrittenOutputsComeWithTheirCopies) {
  const int rows = 10, cols = 12;
  const size_t n = size_t(rows) * cols;
  const auto x = floats(n, 31), g = floats(cols, 32), b = floats(cols, 33), w = floats(size_t(cols) * kD, 34);
  for (GemmMath math : {GemmMath::kBf16, GemmMath::kFp16}) {
    for (int op = 0; op < 7; ++op) {
      auto plain = cpu::make_ops<float>(math), kept = cpu::make_ops<float>(math);
      std::vector<float> y1(n), y2(n), s1(rows), s2(rows), t1(rows), t2(rows), db1(cols, 0.5f), db2(cols, 0.5f);
      std::vector<float> pre = floats(n, 35);
      switch (op) {
        case 0:
          plain->layernorm_forward(x.data(), g.data(), b.data(), y1.data(), s1.data(), t1.data(), rows, cols, 1e-5f);
          kept->layernorm_forward_kept(x.data(), g.data(), b.data(), y2.data(), s2.data(), t2.data(), rows, cols,
                                       1e-5f);
          break;
        case 1:
        case 2: {
          const float p = op == 1 ? kDrop : 0.f;
          std::fill(y2.begin(), y2.end(), std::numeric_limits<float>::quiet_NaN());
          plain->dropout_bias_backward(x.data(), y1.data(), db1.data(), rows, cols, p, kKey);
          kept->dropout_bias_backward_kept(x.data(), y2.data(), db2.data(), rows, cols, p, kKey);
          break;
        }
        case 3:
          std::fill(y2.begin(), y2.end(), std::numeric_limits<float>::quiet_NaN());
          plain->bias_gelu_backward(x.data(), pre.data(), y1.data(), db1.data(), rows, cols);
          kept->bias_gelu_backward_kept(x.data(), pre.data(), y2.data(), db2.data(), rows, cols);
          break;
        case 4:
        case 5: {  // the embeddings' dropout, in place as the model runs it
          const float p = op == 4 ? kDrop : 0.f;
          y1 = x;
          y2 = x;
          plain->dropout_forward(y1.data(), y1.data(), n, p, kKey);
          kept->dropout_forward_kept(y2.data(), y2.data(), n, p, kKey);
          break;
        }
        default:  // y = x, its copy written by the bias sums that read it
          y1 = x;
          y2 = x;
          plain->bias_add_backward(y1.data(), db1.data(), rows, cols);
          kept->bias_add_backward_kept(y2.data(), db2.data(), rows, cols);
      }
      plain->keep_gemm_operand(y1.data(), n);
      const std::string what = std::string(gemm_math_name(math)) + " op " + std::to_string(op);
      if (op >= 1 && op <= 3)
        EXPECT_TRUE(untouched(y2)) << what << ": the fp32 output was written";
      else
        EXPECT_TRUE(same_bits(y1, y2)) << what;
      EXPECT_TRUE(same_bits(s1, s2) && same_bits(t1, t2) && same_bits(db1, db2)) << what;
      std::vector<float> z1(size_t(rows) * kD), z2(z1.size());
      plain->gemm(Trans::kNo, Trans::kNo, rows, kD, cols, 1.f, y1.data(), cols, w.data(), kD, 0.f, z1.data(), kD);
      kept->gemm(Trans::kNo, Trans::kNo, rows, kD, cols, 1.f, y2.data(), cols, w.data(), kD, 0.f, z2.data(), kD);
      EXPECT_TRUE(same_bits(z1, z2)) << what;
      EXPECT_EQ(plain->gemm_operand_conversions() - kept->gemm_operand_conversions(), n) << what;
      EXPECT_EQ(kept->gemm_operand_copy_writes(), n) << what;
    }
  }
}

TEST(KeptOutput, WithoutCastReuseTheFp32OutputIsWritten) {
  const auto scores = floats(kN, 6);
  const auto mask = key_mask();
  auto ops = cpu::make_ops<float>(GemmMath::kBf16, /*reuse_casts=*/false), ref = cpu::make_ops<float>();
  std::vector<float> p1(kN), pd1(kN), p2(kN), pd2(kN);
  ref->softmax_dropout_forward(scores.data(), mask.data(), p1.data(), pd1.data(), kB, kA, kS, kScale, kDrop, kKey);
  ops->softmax_dropout_forward_kept(scores.data(), mask.data(), p2.data(), pd2.data(), kB, kA, kS, kScale, kDrop, kKey);
  EXPECT_TRUE(same_bits(pd1, pd2));
}

}  // namespace
}  // namespace lansbert
