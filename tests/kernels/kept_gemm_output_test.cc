// The GEMMs whose output is a kept GEMM operand (Ops::gemm_kept, gemm_bias_kept,
// gemm_batched_kept) on the CPU twin: in bf16/fp16 with cast reuse the output is written only
// as its kept copy (C keeps what it held), GEMMs that read C get the bits of the plain GEMM
// followed by keep_gemm_operand, and nothing is cast for it; in fp32 (and without reuse) C is
// written as by the plain GEMM.
#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "lansbert/backend/cpu_ops.h"

namespace lansbert {
namespace {

std::vector<float> random_values(size_t n, uint32_t seed) {
  std::mt19937 g(seed);
  std::normal_distribution<float> d(0.f, 1.f);
  std::vector<float> v(n);
  for (float& x : v) x = d(g);
  return v;
}

// One producer of C [rows, cols] (contiguous), written plainly or kept.
struct Producer {
  std::string name;
  int rows, cols;
  std::function<void(Ops<float>&, float*)> plain;  // the plain GEMM
  std::function<void(Ops<float>&, float*)> kept;   // its *_kept twin
};

// Attention's ctx = P v over (sequence, head): P [B, A, S, S], v the third column block of a
// packed [B*S, 3H] tensor, ctx [B*S, H].
constexpr int kB = 2, kA = 3, kS = 10, kD = 8, kH = kA * kD;

std::vector<Producer> producers() {
  static const auto a = random_values(24 * 56, 1), w = random_values(40 * 56, 2), bias = random_values(40, 3);
  static const auto probs = random_values(size_t(kB) * kA * kS * kS, 4);
  static const auto qkv = random_values(size_t(kB) * kS * 3 * kH, 5);
  AttentionShape s{kB, kA, kS, kD, kH, 3 * kH};
  const GemmBatch pv = attention_detail::pv_batch(s, 3 * kH, kH);
  const float* v = qkv.data() + 2 * kH;
  return {
      {"gemm_kept", 24, 40,
       [](Ops<float>& o, float* c) {
         o.gemm(Trans::kNo, Trans::kYes, 24, 40, 56, 1.f, a.data(), 56, w.data(), 56, 0.f, c, 40);
       },
       [](Ops<float>& o, float* c) { o.gemm_kept(Trans::kNo, Trans::kYes, 24, 40, 56, a.data(), 56, w.data(), 56, c, 40); }},
      {"gemm_bias_kept", 24, 40,
       [](Ops<float>& o, float* c) {
         o.gemm_bias(Trans::kNo, Trans::kYes, 24, 40, 56, a.data(), 56, w.data(), 56, bias.data(), c, 40);
       },
       [](Ops<float>& o, float* c) {
         o.gemm_bias_kept(Trans::kNo, Trans::kYes, 24, 40, 56, a.data(), 56, w.data(), 56, bias.data(), c, 40);
       }},
      {"gemm_batched_kept", kB * kS, kH,
       [pv, v](Ops<float>& o, float* c) {
         o.gemm_batched(Trans::kNo, Trans::kNo, kS, kD, kS, 1.f, probs.data(), kS, v, 3 * kH, 0.f, c, kH, pv);
       },
       [pv, v](Ops<float>& o, float* c) {
         o.gemm_batched_kept(Trans::kNo, Trans::kNo, kS, kD, kS, probs.data(), kS, v, 3 * kH, c, kH, pv);
       }},
  };
}

// y [rows, 16] = C [rows, cols] x r [cols, 16]: a GEMM that reads C as an operand.
std::vector<float> read_by_gemm(Ops<float>& ops, const Producer& p, const float* c) {
  const auto r = random_values(size_t(p.cols) * 16, 9);
  std::vector<float> y(size_t(p.rows) * 16);
  ops.gemm(Trans::kNo, Trans::kNo, p.rows, 16, p.cols, 1.f, c, p.cols, r.data(), 16, 0.f, y.data(), 16);
  return y;
}

TEST(KeptGemmOutput, HalfModesWriteOnlyTheCopyWithTheBitsOfTheCast) {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  for (GemmMath math : {GemmMath::kBf16, GemmMath::kFp16})
    for (const Producer& p : producers()) {
      const std::string what = p.name + " " + gemm_math_name(math);
      const size_t n = size_t(p.rows) * p.cols;
      auto plain = cpu::make_ops<float>(math), kept = cpu::make_ops<float>(math);
      std::vector<float> c1(n, 0.f), c2(n, nan);
      p.plain(*plain, c1.data());
      plain->keep_gemm_operand(c1.data(), n);
      p.kept(*kept, c2.data());
      EXPECT_EQ(read_by_gemm(*plain, p, c1.data()), read_by_gemm(*kept, p, c2.data())) << what;
      for (float x : c2) ASSERT_TRUE(std::isnan(x)) << what << ": C was written";
      EXPECT_EQ(kept->gemm_operand_copy_writes(), n) << what;
      EXPECT_EQ(plain->gemm_operand_conversions() - kept->gemm_operand_conversions(), n) << what;
      // Dropped, C is an ordinary operand again: its (unwritten) fp32 values are what a GEMM reads.
      kept->drop_gemm_operand(c2.data());
      for (float x : read_by_gemm(*kept, p, c2.data())) ASSERT_TRUE(std::isnan(x)) << what;
    }
}

TEST(KeptGemmOutput, Fp32AndNoReuseWriteTheOutput) {
  for (bool fp32 : {true, false})
    for (const Producer& p : producers()) {
      const std::string what = p.name + (fp32 ? " fp32" : " bf16 without reuse");
      const size_t n = size_t(p.rows) * p.cols;
      auto make = [&] { return fp32 ? cpu::make_ops<float>() : cpu::make_ops<float>(GemmMath::kBf16, false); };
      auto plain = make(), kept = make();
      std::vector<float> c1(n, 0.f), c2(n, -3.f);
      p.plain(*plain, c1.data());
      p.kept(*kept, c2.data());
      EXPECT_EQ(c1, c2) << what;
      EXPECT_EQ(kept->gemm_operand_copy_writes(), 0u) << what;
      EXPECT_EQ(read_by_gemm(*plain, p, c1.data()), read_by_gemm(*kept, p, c2.data())) << what;
    }
}

}  // namespace
}  // namespace lansbert
