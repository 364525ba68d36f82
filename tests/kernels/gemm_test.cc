// GEMM and two-level batched GEMM of the CPU backend against a naive triple loop, for every
// transpose combination, at odd sizes and with leading dimensions wider than the matrices.
#include <gtest/gtest.h>

#include "attention_batch.h"

#include "fd.h"
#include "naive_gemm.h"
#include "lansbert/backend/cpu_ops.h"

namespace lansbert {
namespace {

using testing::random_vec;

using testing::naive_gemm;

class GemmTest : public ::testing::TestWithParam<std::tuple<Trans, Trans>> {};

TEST_P(GemmTest, MatchesNaiveAtOddSizes) {
  auto [ta, tb] = GetParam();
  auto ops = cpu::make_ops<double>();
  const int m = 7, n = 5, k = 3;
  const int lda = (ta == Trans::kNo ? k : m) + 2, ldb = (tb == Trans::kNo ? n : k) + 1, ldc = n + 3;
  auto a = random_vec(size_t(lda) * std::max(m, k), 1);
  auto b = random_vec(size_t(ldb) * std::max(n, k), 2);
  auto c = random_vec(size_t(ldc) * m, 3);
  auto expected = c;
  naive_gemm(ta, tb, m, n, k, 0.7, a.data(), lda, b.data(), ldb, 0.3, expected.data(), ldc);
  ops->gemm(ta, tb, m, n, k, 0.7, a.data(), lda, b.data(), ldb, 0.3, c.data(), ldc);
  for (size_t i = 0; i < c.size(); ++i) EXPECT_NEAR(c[i], expected[i], 1e-12) << i;
}

INSTANTIATE_TEST_SUITE_P(AllTransposes, GemmTest,
                         ::testing::Combine(::testing::Values(Trans::kNo, Trans::kYes),
                                            ::testing::Values(Trans::kNo, Trans::kYes)));

// gemm_bias (a linear layer's forward: C = op(A) op(B) + bias per column) against the naive
// GEMM and a bias loop, in every transpose; C's old contents are ignored.
TEST_P(GemmTest, GemmBiasMatchesNaive) {
  auto [ta, tb] = GetParam();
  auto ops = cpu::make_ops<double>();
  const int m = 6, n = 9, k = 4;
  const int lda = ta == Trans::kNo ? k : m, ldb = tb == Trans::kNo ? n : k;
  auto a = random_vec(size_t(m) * k, 11), b = random_vec(size_t(k) * n, 12), bias = random_vec(n, 13);
  std::vector<double> expected(size_t(m) * n, 0.0), c = random_vec(size_t(m) * n, 14);
  naive_gemm(ta, tb, m, n, k, 1.0, a.data(), lda, b.data(), ldb, 0.0, expected.data(), n);
  for (int i = 0; i < m; ++i)
    for (int j = 0; j < n; ++j) expected[size_t(i) * n + j] += bias[j];
  ops->gemm_bias(ta, tb, m, n, k, a.data(), lda, b.data(), ldb, bias.data(), c.data(), n);
  for (size_t i = 0; i < c.size(); ++i) EXPECT_NEAR(c[i], expected[i], 1e-12) << i;
}

TEST(GemmBatched, AttentionLayoutMatchesPerHeadLoop) {
  // Q K^T per (batch, head) with heads read in place from (B, S, H) tensors.
  const int B = 3, A = 2, S = 5, D = 3, H = A * D;
  auto ops = cpu::make_ops<double>();
  auto q = random_vec(size_t(B) * S * H, 4), k = random_vec(size_t(B) * S * H, 5);
  std::vector<double> scores(size_t(B) * A * S * S, 0.0), expected(scores.size(), 0.0);
  const GemmBatch g = testing::attention_scores_batch(B, A, S, D);
  ops->gemm_batched(Trans::kNo, Trans::kYes, S, S, D, 1.0, q.data(), H, k.data(), H, 0.0,
                    scores.data(), S, g);
  for (int b = 0; b < B; ++b)
    for (int a = 0; a < A; ++a)
      for (int i = 0; i < S; ++i)
        for (int j = 0; j < S; ++j) {
          double s = 0;
          for (int d = 0; d < D; ++d) s += q[(b * S + i) * H + a * D + d] * k[(b * S + j) * H + a * D + d];
          expected[((b * A + a) * S + i) * S + j] = s;
        }
  for (size_t i = 0; i < scores.size(); ++i) EXPECT_NEAR(scores[i], expected[i], 1e-12);
}

TEST(GemmFloat, MatchesDoubleWithinFp32Rounding) {
  auto opsf = cpu::make_ops<float>();
  const int m = 33, n = 17, k = 65;
  auto a = random_vec(size_t(m) * k, 6), b = random_vec(size_t(k) * n, 7);
  std::vector<double> expected(size_t(m) * n, 0.0);
  naive_gemm(Trans::kNo, Trans::kNo, m, n, k, 1.0, a.data(), k, b.data(), n, 0.0, expected.data(), n);
  auto af = testing::cast<float>(a), bf = testing::cast<float>(b);
  std::vector<float> c(size_t(m) * n, 0.0f);
  opsf->gemm(Trans::kNo, Trans::kNo, m, n, k, 1.0f, af.data(), k, bf.data(), n, 0.0f, c.data(), n);
  for (size_t i = 0; i < c.size(); ++i) EXPECT_NEAR(c[i], expected[i], 1e-5);
}

}  // namespace
}  // namespace lansbert
