// What the composite cuDNN attention graphs compute, checked without a GPU: the graphs of
// cudnn_sdpa_graphs.cc are run by the CPU interpreter of graph_interpreter.h on a small
// BERT-like case (two sequences, one padded; heads interleaved in rows as the runtime's
// staging copies lay them out) and compared with fp64 attention written out directly.
// This catches wrong views (a K^T or P^T stride), a mask on the wrong side, or a wrong
// sign or factor in the backward formula, which finalizing the graph cannot (each was
// tried); with dropout, a mask or its scale on the wrong side of the softmax backward. In the backward the GEMMs' sequence-length overrides alone already keep padded
// keys out, so there the graph's mask is not what this test checks.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <limits>
#include <memory>
#include <random>
#include <vector>

#if LANSBERT_HAVE_CUDNN
#include "cudnn_sdpa_graphs.h"
#include "graph_interpreter.h"
#include "lansbert/kernels/half.h"
#endif

namespace lansbert {
namespace {

#if LANSBERT_HAVE_CUDNN

namespace sdpa = cuda::sdpa;

constexpr int B = 2, H = 2, S = 8, D = 4, LD = H * D;
const std::vector<int> kKeyLengths = {8, 5};

// [B*S, LD] rows, head h of token t at t*LD + h*D: what the runtime hands cuDNN.
struct Rows {
  std::vector<double> v = std::vector<double>(size_t(B) * S * LD);
  double& operator()(int b, int h, int t, int d) { return v[(size_t(b) * S + t) * LD + h * D + d]; }
};

Rows random_rows(std::mt19937& rng) {
  std::normal_distribution<double> n(0.0, 1.0);
  Rows r;
  for (double& x : r.v) x = kern::round_to_bf16(float(n(rng)));  // what the staging copy holds
  return r;
}

// fp64 attention with keys >= the sequence's length masked out; all query rows kept.
struct Reference {
  Rows o, dq, dk, dv;
  std::vector<double> stats = std::vector<double>(size_t(B) * H * S);  // [B, H, S, 1]
};

// With `keep` ([B, H, S, S] of 0/1, dense) the probabilities are dropped out: kept ones
// scaled by r = 1/(1-p) (inverted dropout), as the hand-written attention does.
Reference attention(Rows& q, Rows& k, Rows& v, Rows& d_o, double scale, const std::vector<double>* keep = nullptr,
                    double p_drop = 0) {
  Reference r;
  const double inv_keep = 1.0 / (1.0 - p_drop);
  for (int b = 0; b < B; ++b) {
    const int len = kKeyLengths[size_t(b)];
    for (int h = 0; h < H; ++h) {
      std::vector<double> p(size_t(S) * S, 0.0), dp(size_t(S) * S, 0.0);
      // The factor dropout puts on probability (i, j): m(i, j) p(i, j) is what P V reads.
      auto m = [&](int i, int j) {
        return keep ? (*keep)[((size_t(b) * H + h) * S + i) * S + j] * inv_keep : 1.0;
      };
      for (int i = 0; i < S; ++i) {
        double mx = -std::numeric_limits<double>::infinity();
        std::vector<double> s(static_cast<size_t>(len));
        for (int j = 0; j < len; ++j) {
          double dot = 0;
          for (int d = 0; d < D; ++d) dot += q(b, h, i, d) * k(b, h, j, d);
          s[size_t(j)] = dot * scale;
          mx = std::max(mx, s[size_t(j)]);
        }
        double sum = 0;
        for (int j = 0; j < len; ++j) sum += std::exp(s[size_t(j)] - mx);
        r.stats[(size_t(b) * H + h) * S + i] = mx + std::log(sum);
        for (int j = 0; j < len; ++j) p[size_t(i) * S + j] = std::exp(s[size_t(j)] - mx) / sum;
        for (int d = 0; d < D; ++d) {
          double acc = 0;
          for (int j = 0; j < len; ++j) acc += m(i, j) * p[size_t(i) * S + j] * v(b, h, j, d);
          r.o(b, h, i, d) = acc;
        }
      }
      // Backward: dP = m (dO V^T), dS = P (dP - rowsum(P dP)) scale, dV = (m P)^T dO.
      for (int i = 0; i < S; ++i) {
        double row = 0;
        for (int j = 0; j < len; ++j) {
          double dot = 0;
          for (int d = 0; d < D; ++d) dot += d_o(b, h, i, d) * v(b, h, j, d);
          dp[size_t(i) * S + j] = m(i, j) * dot;
          row += p[size_t(i) * S + j] * dp[size_t(i) * S + j];
        }
        for (int j = 0; j < len; ++j) {
          const double ds = p[size_t(i) * S + j] * (dp[size_t(i) * S + j] - row) * scale;
          for (int d = 0; d < D; ++d) {
            r.dq(b, h, i, d) += ds * k(b, h, j, d);
            r.dk(b, h, j, d) += ds * q(b, h, i, d);
            r.dv(b, h, j, d) += m(i, j) * p[size_t(i) * S + j] * d_o(b, h, i, d);
          }
        }
      }
    }
  }
  return r;
}

// Largest |got - want| over the largest |want|.
double rel_error(const std::vector<double>& got, const std::vector<double>& want) {
  double err = 0, scale = 0;
  for (size_t i = 0; i < want.size(); ++i) {
    err = std::max(err, std::isnan(got[i]) ? INFINITY : std::abs(got[i] - want[i]));
    scale = std::max(scale, std::abs(want[i]));
  }
  return err / scale;
}

// bf16 operands and a bf16 P: about 2^-8 relative per rounding, a few of them in a row.
constexpr double kTolerance = 2e-2;

// One direction's composite graph with random bf16 Q, K, V, dO, the inputs both directions
// take already set, and the fp64 reference on the same values. p_drop > 0: with dropout, a
// random keep mask at that rate (what fused_attention.cu fills from the Philox stream).
struct Case {
  cuda::dnn::GraphBuilder g;
  Rows q, k, v, d_o;
  double scale = 1.0 / std::sqrt(double(D));
  std::unique_ptr<testing::GraphInterpreter> run;
  Reference ref;
  std::vector<double> keep;

  Case(bool backward, uint32_t seed, double p_drop = 0) {
    const bool dropout = p_drop > 0;
    if (backward)
      sdpa::add_backward(g, sdpa::GraphKind::kComposite, {B, H, S, D, LD}, dropout);
    else
      sdpa::add_forward(g, sdpa::GraphKind::kComposite, {B, H, S, D, LD}, dropout);
    std::mt19937 rng(seed);
    q = random_rows(rng), k = random_rows(rng), v = random_rows(rng), d_o = random_rows(rng);
    if (dropout) {
      std::bernoulli_distribution kept(1.0 - p_drop);
      keep.resize(size_t(B) * H * S * S);
      for (double& x : keep) x = kept(rng) ? 1.0 : 0.0;
    }
    ref = attention(q, k, v, d_o, scale, dropout ? &keep : nullptr, p_drop);
    if (!g.ok()) return;
    run = std::make_unique<testing::GraphInterpreter>(g);
    run->set(sdpa::kQ, q.v);
    run->set(sdpa::kK, k.v);
    run->set(sdpa::kV, v.v);
    run->set(sdpa::kScale, {scale});
    run->set(sdpa::kSeqLenQ, {double(S), double(S)});
    run->set(sdpa::kSeqLenKV, {double(kKeyLengths[0]), double(kKeyLengths[1])});
    run->set(sdpa::kNegInf, {-std::numeric_limits<double>::infinity()});  // fused_attention.cu's fill
    if (dropout) {
      run->set(sdpa::kDropMask, keep);
      run->set(sdpa::kDropScale, {double(1.0f / (1.0f - float(p_drop)))});  // as fused_attention.cu passes them
    }
    if (backward) run->set(sdpa::kDropScaleInv, {double(1.0f - float(p_drop))});
  }
};

// Without dropout, and with a quarter of the probabilities dropped.
class FusedAttentionGraphMath : public ::testing::TestWithParam<double> {};

TEST_P(FusedAttentionGraphMath, CompositeForwardComputesMaskedAttentionAndStats) {
  const cuda::CudnnApi& api = cuda::cudnn_api();
  if (!api.ok()) GTEST_SKIP() << "cuDNN not loadable here: " << api.error;
  Case c(false, 7, GetParam());
  ASSERT_TRUE(c.g.ok()) << c.g.error();
  c.run->run();
  const double o_err = rel_error(c.run->get(sdpa::kO), c.ref.o.v);
  const double stats_err = rel_error(c.run->get(sdpa::kStats), c.ref.stats);
  std::printf("  forward (dropout %.2f): O rel error %.2e, Stats rel error %.2e\n", GetParam(), o_err, stats_err);
  EXPECT_LT(o_err, kTolerance);
  EXPECT_LT(stats_err, 1e-5);  // fp32 all the way
  if (GetParam() > 0) {  // and the mask did change the result
    const Reference undropped = attention(c.q, c.k, c.v, c.d_o, c.scale);
    EXPECT_GT(rel_error(c.run->get(sdpa::kO), undropped.o.v), 10 * kTolerance);
  }
}

TEST_P(FusedAttentionGraphMath, CompositeBackwardGivesTheGradients) {
  const cuda::CudnnApi& api = cuda::cudnn_api();
  if (!api.ok()) GTEST_SKIP() << "cuDNN not loadable here: " << api.error;
  Case c(true, 11, GetParam());
  ASSERT_TRUE(c.g.ok()) << c.g.error();
  testing::GraphInterpreter& run = *c.run;
  const Reference& ref = c.ref;
  Rows& q = c.q;
  // As FusedAttention::backward hands them over: O in bf16, the forward's Stats, dQ/dK/dV
  // and the dQ accumulator zeroed first.
  run.set(sdpa::kO, ref.o.v);
  run.set(sdpa::kDO, c.d_o.v);
  run.set(sdpa::kStats, ref.stats);
  const std::vector<double> zeros(q.v.size(), 0.0);
  for (int64_t uid : {sdpa::kDQ, sdpa::kDK, sdpa::kDV}) run.set(uid, zeros);
  run.set(sdpa::kDQAccum, std::vector<double>(size_t(B) * H * S * D, 0.0));
  run.run();
  const double dq = rel_error(run.get(sdpa::kDQ), ref.dq.v), dk = rel_error(run.get(sdpa::kDK), ref.dk.v),
               dv = rel_error(run.get(sdpa::kDV), ref.dv.v);
  std::printf("  backward (dropout %.2f): dQ %.2e, dK %.2e, dV %.2e rel error\n", GetParam(), dq, dk, dv);
  EXPECT_LT(dq, kTolerance);
  EXPECT_LT(dk, kTolerance);
  EXPECT_LT(dv, kTolerance);
  // Padded keys get no gradient (the reference's rows there are exactly zero).
  for (int t = kKeyLengths[1]; t < S; ++t)
    for (int j = 0; j < LD; ++j) {
      const size_t at = (size_t(1) * S + t) * LD + j;
      EXPECT_EQ(run.get(sdpa::kDK)[at], 0.0) << "token " << t;
      EXPECT_EQ(run.get(sdpa::kDV)[at], 0.0) << "token " << t;
    }
}

INSTANTIATE_TEST_SUITE_P(Dropout, FusedAttentionGraphMath, ::testing::Values(0.0, 0.25),
                         [](const ::testing::TestParamInfo<double>& i) { return i.param > 0 ? "Dropout" : "NoDropout"; });

#endif  // LANSBERT_HAVE_CUDNN

}  // namespace
}  // namespace lansbert
