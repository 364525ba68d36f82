// The cuDNN fused attention against the hand-written attention on the same device inputs:
// forward (ctx) within kFusedForwardTolerance and backward (dq, dk, dv) within
// kFusedBackwardTolerance of the largest reference value (the fused path computes in bf16
// with fp32 accumulation; the reference is fp32), with padded sequences, without and with
// attention dropout (the same keep mask on both paths); and calls the fused path does not
// take falling back to exactly the hand-written bits.
// Skipped without a device; the accuracy tests also skip when cuDNN is unavailable there
// (the fallback tests still run). Printed: max abs and rel error per tensor.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>

#include "cuda_ops.cuh"
#include "gpu_test_util.h"

namespace lansbert {
namespace {

// One attention call's device buffers (inputs drawn from a seed) and its arguments.
struct Attn {
  AttentionShape s;
  float dropout = 0;
  bool prefix = true;
  Buffer<float> q, k, v, d_ctx, ctx, probs, probs_drop, scores, d_q, d_k, d_v, d_probs, d_scores;
  Buffer<int32_t> mask, lengths;

  Attn(AttentionShape shape, std::vector<int32_t> lens, float p, bool prefix_mask = true, uint32_t seed = 1)
      : s(shape), dropout(p), prefix(prefix_mask) {
    const size_t n = size_t(s.batch) * s.seq * s.ld, np = size_t(s.batch) * s.heads * s.seq * s.seq;
    q = to_device(random_vector(n, seed, 1.0f));
    k = to_device(random_vector(n, seed + 1, 1.0f));
    v = to_device(random_vector(n, seed + 2, 1.0f));
    d_ctx = to_device(random_vector(n, seed + 3, 1.0f));
    std::vector<int32_t> m(size_t(s.batch) * s.seq, 0);
    for (int b = 0; b < s.batch; ++b)
      for (int t = 0; t < lens[b]; ++t) m[size_t(b) * s.seq + t] = 1;
    if (!prefix) m[1] = 0;  // a hole in the first sequence
    mask = to_device(m);
    lengths = to_device(lens);
    for (Buffer<float>* b : {&ctx, &d_q, &d_k, &d_v}) *b = Buffer<float>(n, cuda::device_allocator());
    for (Buffer<float>* b : {&probs, &probs_drop, &scores, &d_probs, &d_scores})
      *b = Buffer<float>(np, cuda::device_allocator());
  }
  AttentionForward<float> forward() {
    AttentionForward<float> f;
    f.shape = s;
    f.scale = 1.0f / std::sqrt(float(s.head_dim));
    f.dropout = dropout;
    f.dropout_key = RngKey{5, 7, 1};
    f.key_mask = mask.data();
    f.key_lengths = prefix ? lengths.data() : nullptr;
    f.q = q.data();
    f.k = k.data();
    f.v = v.data();
    f.ctx = ctx.data();
    f.probs = probs.data();
    f.probs_drop = dropout > 0 ? probs_drop.data() : nullptr;
    f.scores = scores.data();
    return f;
  }
  AttentionBackward<float> backward(AttentionImpl impl) {
    const AttentionForward<float> f = forward();
    AttentionBackward<float> b;
    b.shape = s;
    b.scale = f.scale;
    b.dropout = f.dropout;
    b.dropout_key = f.dropout_key;
    b.impl = impl;
    b.key_mask = f.key_mask;
    b.key_lengths = f.key_lengths;
    b.q = f.q;
    b.k = f.k;
    b.v = f.v;
    b.ctx = f.ctx;
    b.probs = f.probs;
    b.probs_drop = f.probs_drop;
    b.d_ctx = d_ctx.data();
    b.d_q = d_q.data();
    b.d_k = d_k.data();
    b.d_v = d_v.data();
    b.d_probs = d_probs.data();
    b.d_scores = d_scores.data();
    return b;
  }
  // Forward then backward on `ops`; returns what the forward ran.
  AttentionImpl run(Ops<float>& ops) {
    const AttentionImpl impl = ops.attention_forward(forward());
    ops.attention_backward(backward(impl));
    return impl;
  }
};

std::unique_ptr<cuda::CudaOps> ops_with(AttentionMode mode) {
  cuda::OpsOptions o;
  o.attention = mode;
  return std::make_unique<cuda::CudaOps>(o);
}

// Skips (with the reason) when cuDNN cannot run on this device at all.
#define LB_REQUIRE_CUDNN(ops)                                                              \
  do {                                                                                     \
    const std::string avail = (ops).fused().availability();                                \
    std::printf("  fused attention: %s\n", avail.c_str());                                 \
    if (avail.rfind("unavailable", 0) == 0) GTEST_SKIP() << "cuDNN fused attention " << avail; \
  } while (0)

void expect_matches_native(const AttentionShape& s, const std::vector<int32_t>& lens, AttentionMode mode,
                           float dropout = 0.0f) {
  auto native = ops_with(AttentionMode::kNative);
  auto fused = ops_with(mode);
  Attn ref(s, lens, dropout), got(s, lens, dropout);
  ASSERT_EQ(ref.run(*native), AttentionImpl::kNative);
  const AttentionImpl impl = got.run(*fused);
  ASSERT_EQ(impl, AttentionImpl::kFused) << "fell back: " << fused->fused().last_fallback();
  // A fused backward that could not run is replaced by the hand-written one, whose gradients
  // would pass the comparisons below; only the fallback reason tells (a fused forward clears
  // it, a backward fallback sets it).
  EXPECT_EQ(fused->fused().last_fallback(), "") << "the fused backward fell back";
  const std::string tag = " B=" + std::to_string(s.batch) + " S=" + std::to_string(s.seq) +
                          (dropout > 0 ? " dropout" : "");
  expect_close("fused ctx" + tag, to_host(got.ctx), to_host(ref.ctx), cuda::kFusedForwardTolerance);
  expect_close("fused d_q" + tag, to_host(got.d_q), to_host(ref.d_q), cuda::kFusedBackwardTolerance);
  expect_close("fused d_k" + tag, to_host(got.d_k), to_host(ref.d_k), cuda::kFusedBackwardTolerance);
  expect_close("fused d_v" + tag, to_host(got.d_v), to_host(ref.d_v), cuda::kFusedBackwardTolerance);
}

TEST(FusedAttention, ForwardAndBackwardMatchTheHandWrittenAttention) {
  LB_REQUIRE_GPU();
  LB_REQUIRE_CUDNN(*ops_with(AttentionMode::kCudnn));
  expect_matches_native({3, 4, 128, 64, 256}, {128, 100, 37}, AttentionMode::kCudnn);
  expect_matches_native({2, 2, 77, 64, 128}, {77, 5}, AttentionMode::kCudnn);  // S not a tile multiple
  expect_matches_native({2, 16, 512, 64, 1024}, {512, 300}, AttentionMode::kCudnn);  // bert-large, phase 2
}

// BERT's attention dropout: the fused path applies lansbert's own keep mask, so it matches
// the hand-written attention with dropout as closely as without (and a mask that differed
// would be off by far more: a tenth of the probabilities zeroed or not).
TEST(FusedAttention, WithDropoutMatchesTheHandWrittenAttentionWithTheSameMask) {
  LB_REQUIRE_GPU();
  LB_REQUIRE_CUDNN(*ops_with(AttentionMode::kCudnn));
  expect_matches_native({3, 4, 128, 64, 256}, {128, 100, 37}, AttentionMode::kCudnn, 0.1f);
  expect_matches_native({2, 16, 512, 64, 1024}, {512, 300}, AttentionMode::kCudnn, 0.1f);
  expect_matches_native({2, 4, 64, 64, 256}, {64, 40}, AttentionMode::kAuto, 0.1f);
}

TEST(FusedAttention, AutoModeKeepsTheFusedPathWhenItAgrees) {
  LB_REQUIRE_GPU();
  auto ops = ops_with(AttentionMode::kAuto);
  LB_REQUIRE_CUDNN(*ops);
  // First use compares with the hand-written results (and returns fused results if they
  // agree); the second call of the same shape runs fused without comparing.
  expect_matches_native({2, 4, 64, 64, 256}, {64, 40}, AttentionMode::kAuto);
  Attn a({2, 4, 64, 64, 256}, {64, 40}, 0.0f);
  EXPECT_EQ(a.run(*ops), AttentionImpl::kFused) << ops->fused().last_fallback();
  EXPECT_EQ(a.run(*ops), AttentionImpl::kFused) << ops->fused().last_fallback();
}

// Without and with attention dropout (the hand-written backward then recomputes the dropped
// probabilities from the same key).
class FusedAttentionFallback : public ::testing::TestWithParam<float> {};

TEST_P(FusedAttentionFallback, AFailedAutoBackwardCheckSendsLaterBackwardsToTheHandWrittenOne) {
  LB_REQUIRE_GPU();
  auto ops = ops_with(AttentionMode::kAuto);
  LB_REQUIRE_CUDNN(*ops);
  const AttentionShape s{2, 4, 64, 64, 256};
  const float p = GetParam();
  // Two layers: both forwards run fused (the first one checked), then the first backward's
  // comparison fails (simulated here); the other layer's backward, whose forward saved
  // statistics, must not run the fused backward that was just found wrong.
  Attn l0(s, {64, 40}, p, true, 1), l1(s, {64, 40}, p, true, 11), ref(s, {64, 40}, p, true, 1);
  const AttentionImpl i0 = ops->attention_forward(l0.forward());
  const AttentionImpl i1 = ops->attention_forward(l1.forward());
  ASSERT_EQ(i0, AttentionImpl::kFused) << ops->fused().last_fallback();
  ASSERT_EQ(i1, AttentionImpl::kFused) << ops->fused().last_fallback();
  ops->fused().record_check(s, p > 0, /*backward=*/true, 1.0);
  ops->attention_backward(l0.backward(i0));
  EXPECT_NE(ops->fused().last_fallback().find("switched off"), std::string::npos) << ops->fused().last_fallback();
  // The hand-written backward from recomputed probabilities: the native run's bits.
  auto native = ops_with(AttentionMode::kNative);
  ref.run(*native);
  for (auto pair : {std::make_pair(&l0.d_q, &ref.d_q), std::make_pair(&l0.d_k, &ref.d_k),
                    std::make_pair(&l0.d_v, &ref.d_v)}) {
    const std::vector<float> a = to_host(*pair.first), b = to_host(*pair.second);
    EXPECT_EQ(0, std::memcmp(a.data(), b.data(), a.size() * sizeof(float)));
  }
  // And the fused path stays off for new forwards.
  EXPECT_EQ(ops->attention_forward(l1.forward()), AttentionImpl::kNative);
}

INSTANTIATE_TEST_SUITE_P(Dropout, FusedAttentionFallback, ::testing::Values(0.0f, 0.1f));

// A call the fused path does not take gives exactly what native ops give.
void expect_native_bits(Attn& fused_in, Attn& native_in, const char* reason_part) {
  auto fused = ops_with(AttentionMode::kCudnn);
  auto native = ops_with(AttentionMode::kNative);
  EXPECT_EQ(fused_in.run(*fused), AttentionImpl::kNative);
  native_in.run(*native);
  EXPECT_NE(fused->fused().last_fallback().find(reason_part), std::string::npos) << fused->fused().last_fallback();
  for (auto pair : {std::make_pair(&fused_in.ctx, &native_in.ctx), std::make_pair(&fused_in.d_q, &native_in.d_q),
                    std::make_pair(&fused_in.d_k, &native_in.d_k), std::make_pair(&fused_in.d_v, &native_in.d_v)}) {
    const std::vector<float> a = to_host(*pair.first), b = to_host(*pair.second);
    EXPECT_EQ(0, std::memcmp(a.data(), b.data(), a.size() * sizeof(float))) << reason_part;
  }
}

TEST(FusedAttention, UnsupportedCallsFallBackToTheHandWrittenBits) {
  LB_REQUIRE_GPU();
  {  // a mask with a hole has no lengths
    Attn a({2, 4, 64, 64, 256}, {64, 40}, 0.0f, false), b({2, 4, 64, 64, 256}, {64, 40}, 0.0f, false);
    expect_native_bits(a, b, "prefix");
  }
  {  // head_dim 12 is not a multiple of 8
    Attn a({2, 4, 32, 12, 48}, {32, 20}, 0.0f), b({2, 4, 32, 12, 48}, {32, 20}, 0.0f);
    expect_native_bits(a, b, "head_dim");
  }
}

}  // namespace
}  // namespace lansbert
