// Embedding lookup, masked-position gather and their scatter-add gradients on the CPU:
// forward against naive indexing, backward against fp64 central differences, with repeated
// indices (the case where a racy scatter would go wrong).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>

#include "fd.h"
#include "lansbert/backend/cpu_ops.h"
#include "lansbert/kernels/scatter_order.h"

namespace lansbert {
namespace {

using testing::check_gradient;
using testing::random_vec;

constexpr int kRows = 6, kDim = 70, kN = 9;
const std::vector<int32_t> kIds = {3, 0, 5, 3, 3, 1, 5, 2, 0};

TEST(Embedding, ForwardAndAccumulate) {
  auto ops = cpu::make_ops<double>();
  auto table = random_vec(kRows * kDim, 1);
  // A sentinel in out: accumulate=false must overwrite it (out starting at 0 would not tell).
  std::vector<double> out(kN * kDim, 7.0);
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
  // A sentinel in dst (an overwrite, not +=), and every column (kDim 70: past a vector's width).
  std::vector<double> dst(kN * kDim, 7.0), dsrc(src.size(), 0.0);
  ops->gather_rows_forward(src.data(), kIds.data(), dst.data(), kN, kDim);
  for (int i = 0; i < kN; ++i)
    for (int c = 0; c < kDim; ++c) EXPECT_EQ(dst[i * kDim + c], src[kIds[i] * kDim + c]) << i << " " << c;
  // The backward adds into dsrc: from a sentinel too, then the sentinel taken off.
  std::fill(dsrc.begin(), dsrc.end(), 7.0);
  ops->gather_rows_backward(w.data(), kIds.data(), dsrc.data(), kN, kDim);
  for (double& e : dsrc) e -= 7.0;
  auto loss = [&] {
    std::vector<double> out(kN * kDim);
    ops->gather_rows_forward(src.data(), kIds.data(), out.data(), kN, kDim);
    double s = 0;
    for (size_t i = 0; i < out.size(); ++i) s += out[i] * w[i];
    return s;
  };
  EXPECT_LT(check_gradient(src, dsrc, loss), 1e-8);
}

// The scatter's summation order is the contract the CUDA twin shares (scatter_order.h): rows
// in sorted order, each run cut into pieces at multiples of kScatterPiece of the sorted
// index, each piece summed from zero, the row plus the pieces in order. Spelled out here
// from that description, in float, and compared bit for bit; the data (values of mixed
// magnitude, runs shorter than a piece, a run across one boundary, one across several)
// make the plain in-order sum differ, so another order would fail.
TEST(Embedding, ScatterSumsInTheSharedPieceOrder) {
  constexpr int P = kern::kScatterPiece, rows = 5, dim = 3, n = 4 * P + 23;
  std::vector<int32_t> ids(n);
  for (int i = 0; i < n; ++i) ids[i] = i % 7 == 0 ? 1 : (i % 7 == 1 ? 3 : (i % 11 == 2 ? 4 : 0));
  std::mt19937 g(9);
  std::uniform_real_distribution<float> u(-1.f, 1.f);
  std::vector<float> src(size_t(n) * dim), base(size_t(rows) * dim);
  for (float& x : src) x = u(g) * std::pow(10.f, float(int(u(g) * 4)));
  for (float& x : base) x = u(g) * 1e3f;

  std::vector<float> want = base, in_order = base;
  int first = 0;  // absolute sorted index of the current row's first entry
  for (int r = 0; r < rows; ++r) {
    std::vector<int> mine;
    for (int i = 0; i < n; ++i)
      if (ids[i] == r) mine.push_back(i);
    const int s = first, e = first + int(mine.size());
    for (int c = 0; c < dim; ++c) {
      float row = want[r * dim + c];
      for (int a = s; a < e;) {
        const int b = std::min(e, (a / P + 1) * P);
        float piece = 0.f;
        for (int j = a; j < b; ++j) piece += src[size_t(mine[j - s]) * dim + c];
        row += piece;
        a = b;
      }
      want[r * dim + c] = row;
      for (int i : mine) in_order[r * dim + c] += src[size_t(i) * dim + c];
    }
    first = e;
  }
  std::vector<float> got = base;
  cpu::make_ops<float>()->embedding_backward(ids.data(), src.data(), got.data(), n, dim);
  EXPECT_EQ(got, want);
  EXPECT_NE(got, in_order) << "the data do not tell the piece order from the plain order";
}

}  // namespace
}  // namespace lansbert
