// Embedding lookup, masked-position gather and their scatter-add gradients on the CPU:
// forward against naive indexing, backward against fp64 central differences, with repeated
// indices (the case where a racy scatter would go wrong).
#include <gtest/gtest.h>

#include "fd.h"
#include "lansbert/backend/cpu_ops.h"

namespace lansbert {
namespace {

using testing::check_gradient;
using testing::random_vec;

constexpr int kRows = 6, kDim = 70, kN = 9;
const std::vector<int32_t> kIds = {3, 0, 5, 3, 3, 1, 5, 2, 0};

TEST(Embedding, ForwardAndAccumulate) {
  auto ops = cpu::make_ops<double>();
  auto table = random_vec(kRows * kDim, 1);
  std::vector<double> out(kN * kDim);
  ops->embedding_forward(kIds.data(), table.data(), out.data(), kN, kDim, false);
  for (int i = 0; i < kN; ++i)
    for (int c = 0; c < kDim; ++c) EXPECT_EQ(out[i * kDim + c], table[kIds[i] * kDim + c]);
  ops->embedding_forward(kIds.data(), table.data(), out.data(), kN, kDim, true);
  for (int i = 0; i < kN; ++i)
    for (int c = 0; c < kDim; ++c) EXPECT_EQ(out[i * kDim + c], 2 * table[kIds[i] * kDim + c]);
}

TEST(Embedding, BackwardMatchesFiniteDifferences) {
  auto ops = cpu::make_ops<double>();
  auto table = random_vec(kRows * kDim, 2), w = random_vec(kN * kDim, 3);
  std::vector<double> dtable(table.size(), 0.0);
  ops->embedding_backward(kIds.data(), w.data(), dtable.data(), kN, kDim);
  auto loss = [&] {
    std::vector<double> out(kN * kDim);
    ops->embedding_forward(kIds.data(), table.data(), out.data(), kN, kDim, false);
    double s = 0;
    for (size_t i = 0; i < out.size(); ++i) s += out[i] * w[i];
    return s;
  };
  EXPECT_LT(check_gradient(table, dtable, loss), 1e-8);
}

TEST(GatherRows, ForwardAndBackward) {
  auto ops = cpu::make_ops<double>();
  auto src = random_vec(kRows * kDim, 4), w = random_vec(kN * kDim, 5);
  std::vector<double> dst(kN * kDim), dsrc(src.size(), 0.0);
  ops->gather_rows_forward(src.data(), kIds.data(), dst.data(), kN, kDim);
  for (int i = 0; i < kN; ++i) EXPECT_EQ(dst[i * kDim + 7], src[kIds[i] * kDim + 7]);
  ops->gather_rows_backward(w.data(), kIds.data(), dsrc.data(), kN, kDim);
  auto loss = [&] {
    std::vector<double> out(kN * kDim);
    ops->gather_rows_forward(src.data(), kIds.data(), out.data(), kN, kDim);
    double s = 0;
    for (size_t i = 0; i < out.size(); ++i) s += out[i] * w[i];
    return s;
  };
  EXPECT_LT(check_gradient(src, dsrc, loss), 1e-8);
}

}  // namespace
}  // namespace lansbert
