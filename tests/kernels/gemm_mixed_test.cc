// The CPU's bf16/fp16 GEMM emulation (GemmMath): both operands rounded with the shared
// half.h bodies, products and sums in fp32. Checked against a double loop over the rounded
// operands (tight) and against the unrounded product (must differ by the operand rounding,
// so a mode that forgot to round fails), for single and two-level batched GEMMs.
#include <gtest/gtest.h>

#include "attention_batch.h"

#include <cmath>

#include "fd.h"
#include "lansbert/backend/cpu_ops.h"
#include "lansbert/kernels/half.h"
#include "naive_gemm.h"

namespace lansbert {
namespace {

using testing::naive_gemm;

std::vector<float> rounded(const std::vector<float>& x, GemmMath math) {
  std::vector<float> r(x.size());
  for (size_t i = 0; i < x.size(); ++i)
    r[i] = math == GemmMath::kBf16 ? kern::round_to_bf16(x[i]) : kern::round_to_fp16(x[i]);
  return r;
}

// Largest |got - want| over the largest |want|.
double rel_err(const std::vector<float>& got, const std::vector<double>& want) {
  double err = 0, scale = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    err = testing::worse(err, std::abs(double(got[i]) - want[i]));
    scale = std::max(scale, std::abs(want[i]));
  }
  return err / scale;
}

class GemmMixedTest : public ::testing::TestWithParam<std::tuple<GemmMath, Trans, Trans>> {};

TEST_P(GemmMixedTest, RoundsBothOperandsThenAccumulatesInFp32) {
  auto [math, ta, tb] = GetParam();
  auto ops = cpu::make_ops<float>(math);
  const int m = 37, n = 29, k = 131;
  const int lda = (ta == Trans::kNo ? k : m) + 3, ldb = (tb == Trans::kNo ? n : k) + 2, ldc = n + 1;
  const auto a = testing::cast<float>(testing::random_vec(size_t(lda) * std::max(m, k), 11, -4, 4));
  const auto b = testing::cast<float>(testing::random_vec(size_t(ldb) * std::max(n, k), 12, -4, 4));
  const auto c0 = testing::cast<float>(testing::random_vec(size_t(ldc) * m, 13));
  std::vector<double> want(c0.begin(), c0.end()), unrounded(c0.begin(), c0.end());
  const auto ar = rounded(a, math), br = rounded(b, math);
  naive_gemm(ta, tb, m, n, k, 0.5, ar.data(), lda, br.data(), ldb, 1.0, want.data(), ldc);
  naive_gemm(ta, tb, m, n, k, 0.5, a.data(), lda, b.data(), ldb, 1.0, unrounded.data(), ldc);
  auto c = c0;
  ops->gemm(ta, tb, m, n, k, 0.5f, a.data(), lda, b.data(), ldb, 1.0f, c.data(), ldc);
  EXPECT_LT(rel_err(c, want), 1e-6) << gemm_math_name(math);
  // bf16 keeps 8 significant bits, fp16 11: sums of 131 products move by ~1e-3 / ~1e-4.
  EXPECT_GT(rel_err(c, unrounded), 1e-5) << gemm_math_name(math) << ": operands were not rounded";
}

INSTANTIATE_TEST_SUITE_P(ModesAndTransposes, GemmMixedTest,
                         ::testing::Combine(::testing::Values(GemmMath::kBf16, GemmMath::kFp16),
                                            ::testing::Values(Trans::kNo, Trans::kYes),
                                            ::testing::Values(Trans::kNo, Trans::kYes)));

TEST(GemmMixed, BatchedAttentionLayoutRoundsEveryHead) {
  const int B = 2, A = 3, S = 9, D = 16, H = A * D;
  for (GemmMath math : {GemmMath::kBf16, GemmMath::kFp16}) {
    auto ops = cpu::make_ops<float>(math);
    const auto q = testing::cast<float>(testing::random_vec(size_t(B) * S * H, 14));
    const auto k = testing::cast<float>(testing::random_vec(size_t(B) * S * H, 15));
    const auto qr = rounded(q, math), kr = rounded(k, math);
    const GemmBatch g = testing::attention_scores_batch(B, A, S, D);
    std::vector<float> scores(size_t(B) * A * S * S, 0.f);
    ops->gemm_batched(Trans::kNo, Trans::kYes, S, S, D, 1.f, q.data(), H, k.data(), H, 0.f,
                      scores.data(), S, g);
    std::vector<double> want(scores.size(), 0.0);
    for (int o = 0; o < B; ++o)
      for (int i = 0; i < A; ++i)
        naive_gemm(Trans::kNo, Trans::kYes, S, S, D, 1.0, qr.data() + o * S * H + i * D, H,
                   kr.data() + o * S * H + i * D, H, 0.0, want.data() + (o * A + i) * S * S, S);
    EXPECT_LT(rel_err(scores, want), 1e-6) << gemm_math_name(math);
  }
}

TEST(GemmMixed, Fp16OverflowBecomesInfinity) {
  // 70000 is beyond fp16's range: the operand becomes inf, as on a V100's tensor cores; the
  // loss scaler then sees a non-finite gradient and skips the step.
  auto ops = cpu::make_ops<float>(GemmMath::kFp16);
  const float a[2] = {70000.f, 1.f}, b[2] = {1.f, 1.f};
  float c = 0;
  ops->gemm(Trans::kNo, Trans::kNo, 1, 1, 2, 1.f, a, 2, b, 1, 0.f, &c, 1);
  EXPECT_TRUE(std::isinf(c));
  auto bf = cpu::make_ops<float>(GemmMath::kBf16);
  bf->gemm(Trans::kNo, Trans::kNo, 1, 1, 2, 1.f, a, 2, b, 1, 0.f, &c, 1);
  EXPECT_EQ(c, 70144.f + 1.f);  // bf16 has fp32's range: 70000 rounds to 70144 (step 512)
}

TEST(GemmMixedDeath, DoubleAndTf32AreRefused) {
  EXPECT_DEATH(cpu::make_ops<double>(GemmMath::kBf16), "float only");
  EXPECT_DEATH(cpu::make_ops<float>(GemmMath::kTf32), "no TF32");
}

}  // namespace
}  // namespace lansbert
