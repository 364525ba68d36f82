// The attention ops that produce a kept GEMM operand directly (Ops::softmax_dropout_forward_kept,
// Ops::softmax_backward_kept) on the CPU backend: a GEMM reading the kept output sees the bits
// of the plain op followed by keep_gemm_operand; with 16-bit GEMMs nothing is cast for it and
// the fp32 output stays unwritten; with fp32 GEMMs (or reuse off) the fp32 output is written.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>

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

TEST(KeptOutput, BiasGeluForwardWritesTheCopyOnly) {
  const int rows = 11, cols = 13;
  const size_t n = size_t(rows) * cols;
  const auto pre0 = floats(n, 7), bias = floats(cols, 8), w = floats(size_t(cols) * kD, 9);
  for (GemmMath math : {GemmMath::kBf16, GemmMath::kFp16}) {
    auto plain = cpu::make_ops<float>(math), kept = cpu::make_ops<float>(math);
    std::vector<float> pre1 = pre0, pre2 = pre0, act1(n), act2(n, std::numeric_limits<float>::quiet_NaN());
    plain->bias_gelu_forward(pre1.data(), bias.data(), act1.data(), rows, cols);
    plain->keep_gemm_operand(act1.data(), n);
    kept->bias_gelu_forward_kept(pre2.data(), bias.data(), act2.data(), rows, cols);
    EXPECT_TRUE(same_bits(pre1, pre2)) << "pre += bias must still be written";
    std::vector<float> y1(size_t(rows) * kD), y2(y1.size());
    plain->gemm(Trans::kNo, Trans::kNo, rows, kD, cols, 1.f, act1.data(), cols, w.data(), kD, 0.f, y1.data(), kD);
    kept->gemm(Trans::kNo, Trans::kNo, rows, kD, cols, 1.f, act2.data(), cols, w.data(), kD, 0.f, y2.data(), kD);
    EXPECT_TRUE(same_bits(y1, y2)) << gemm_math_name(math);
    EXPECT_TRUE(untouched(act2)) << gemm_math_name(math);
    EXPECT_EQ(plain->gemm_operand_conversions() - kept->gemm_operand_conversions(), n);
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
