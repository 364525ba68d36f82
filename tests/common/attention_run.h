// One attention forward and backward through Ops::attention_forward/backward on host vectors
// (the inputs copied to the backend's memory and the results back), with q, k, v packed as
// the model packs them ([B*S, 3H]): for the tests comparing attention implementations.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <random>
#include <vector>

#include "lansbert/backend/ops.h"
#include "lansbert/core/buffer.h"

namespace lansbert::testing {

template <typename T>
struct AttentionCase {
  AttentionShape shape;  // qkv_ld is set to 3 * ld
  float dropout = 0;
  RngKey key{3, 1, 2};
  std::vector<int32_t> mask;      // [B, S]
  std::vector<T> qkv, d_ctx;      // [B*S, 3H], [B*S, H]

  // Random inputs of the given scale; key lengths per sequence (the rest masked).
  AttentionCase(int B, int A, int S, int D, const std::vector<int>& lengths, float p, uint32_t seed, double sd = 1.0) {
    shape = AttentionShape{B, A, S, D, A * D, 3 * A * D};
    dropout = p;
    mask.assign(size_t(B) * S, 0);
    for (int b = 0; b < B; ++b)
      for (int s = 0; s < lengths[b % lengths.size()] && s < S; ++s) mask[size_t(b) * S + s] = 1;
    std::mt19937 g(seed);
    std::normal_distribution<double> d(0.0, sd);
    qkv.resize(size_t(B) * S * 3 * A * D);
    for (T& x : qkv) x = T(d(g));
    d_ctx.resize(size_t(B) * S * A * D);
    for (T& x : d_ctx) x = T(d(g));
  }
};

template <typename T>
struct AttentionResult {
  AttentionImpl impl = AttentionImpl::kNative;
  std::vector<T> ctx, d_qkv, stats;  // stats: [B, A, S], what a fused forward saved
};

template <typename T>
AttentionResult<T> run_attention(Ops<T>& ops, const AttentionCase<T>& c) {
  const AttentionShape& s = c.shape;
  const size_t NH = size_t(s.batch) * s.seq * s.ld, P = size_t(s.batch) * s.heads * s.seq * s.seq;
  Allocator& al = ops.allocator();
  Buffer<T> qkv(3 * NH, al), ctx(NH, al), d_ctx(NH, al), d_qkv(3 * NH, al), probs(P, al), probs_drop(P, al),
      scores(P, al), d_probs(P, al), d_scores(P, al), stats(size_t(s.batch) * s.heads * s.seq, al);
  Buffer<int32_t> mask(c.mask.size(), al);
  al.copy_from_host(qkv.data(), c.qkv.data(), qkv.bytes());
  al.copy_from_host(d_ctx.data(), c.d_ctx.data(), d_ctx.bytes());
  al.copy_from_host(mask.data(), c.mask.data(), mask.bytes());
  d_qkv.zero();
  const T scale = T(1) / std::sqrt(T(s.head_dim));
  AttentionForward<T> f;
  f.shape = s;
  f.scale = scale;
  f.dropout = c.dropout;
  f.dropout_key = c.key;
  f.key_mask = mask.data();
  f.q = qkv.data();
  f.k = qkv.data() + s.ld;
  f.v = qkv.data() + 2 * s.ld;
  f.ctx = ctx.data();
  f.probs = probs.data();
  f.probs_drop = c.dropout > 0 ? probs_drop.data() : nullptr;
  f.stats = stats.data();
  f.scores = scores.data();
  AttentionResult<T> r;
  r.impl = ops.attention_forward(f);
  AttentionBackward<T> b;
  b.shape = s;
  b.scale = scale;
  b.dropout = c.dropout;
  b.dropout_key = c.key;
  b.impl = r.impl;
  b.key_mask = mask.data();
  b.q = f.q;
  b.k = f.k;
  b.v = f.v;
  b.ctx = ctx.data();
  b.probs = probs.data();
  b.probs_drop = f.probs_drop;
  b.stats = stats.data();
  b.d_ctx = d_ctx.data();
  b.d_q = d_qkv.data();
  b.d_k = d_qkv.data() + s.ld;
  b.d_v = d_qkv.data() + 2 * s.ld;
  b.d_probs = d_probs.data();
  b.d_scores = d_scores.data();
  ops.attention_backward(b);
  auto to_host = [&](const Buffer<T>& x) {
    std::vector<T> h(x.size());
    al.copy_to_host(h.data(), x.data(), x.bytes());
    return h;
  };
  r.ctx = to_host(ctx);
  r.d_qkv = to_host(d_qkv);
  r.stats = to_host(stats);
  return r;
}

// max |a - b| / max |b| (the comparison the attention tests use).
template <typename T>
double rel_max_diff(const std::vector<T>& a, const std::vector<T>& b) {
  double diff = 0, ref = 0;
  for (size_t i = 0; i < a.size() && i < b.size(); ++i) {
    diff = std::max(diff, std::abs(double(a[i]) - double(b[i])));
    ref = std::max(ref, std::abs(double(b[i])));
  }
  return a.size() != b.size() || diff != diff ? 1e30 : ref > 0 ? diff / ref : diff;
}

}  // namespace lansbert::testing
