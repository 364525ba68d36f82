// One attention forward and backward through Ops::attention_forward/backward on host vectors
// (the inputs copied to the backend's memory and the results back), with q, k, v packed as
// the model packs them ([B*S, 3H]): for the tests comparing attention implementations.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <random>
#include <vector>

#include "fd.h"
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
  // As the model calls an attention that reads only kept copies (16-bit GEMMs with cast
  // reuse): q, k, v, ctx and d(ctx) kept (AttentionForward::qkv_kept, ctx_kept,
  // AttentionBackward::d_ctx_kept), ctx and, with d_qkv_kept, d(q, k, v) read back through a
  // GEMM with the identity (exact: what GEMMs see, the copy where one is kept).
  bool kept_io = false;
  bool d_qkv_kept = false;
  // AttentionBackward::d_qkv_bias (with d_qkv_kept): the sums are added to bias_init.
  bool qkv_bias = false;
  T bias_init = T(0.5);

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

// Sequence b of c holds the sequences of `lengths` packed one after another (data/packing.h):
// its mask numbers them 1, 2, ... and the positions after them are padding (0).
template <typename T>
void pack_sequences(AttentionCase<T>& c, int b, const std::vector<int>& lengths) {
  const int S = c.shape.seq;
  int32_t* row = c.mask.data() + size_t(b) * S;
  std::fill(row, row + S, 0);
  int t = 0;
  for (size_t i = 0; i < lengths.size(); ++i)
    for (int n = 0; n < lengths[i] && t < S; ++n) row[t++] = int32_t(i + 1);
}

template <typename T>
struct AttentionResult {
  AttentionImpl impl = AttentionImpl::kNative;
  std::vector<T> ctx, d_qkv, stats;  // stats: [B, A, S], what a fused forward saved
  std::vector<T> d_qkv_bias;         // [3H] with AttentionCase::qkv_bias
};

// bias_init + the column sums of d_qkv [rows, cols], in double: what d_qkv_bias should hold.
template <typename T>
std::vector<double> column_sums(const std::vector<T>& d_qkv, int cols, double init) {
  std::vector<double> s(cols, init);
  for (size_t i = 0; i < d_qkv.size(); ++i) s[i % cols] += double(d_qkv[i]);
  return s;
}

// x [rows, cols] as GEMMs read it: x times the identity.
template <typename T>
std::vector<T> read_by_gemm(Ops<T>& ops, const T* x, int rows, int cols) {
  Allocator& al = ops.allocator();
  std::vector<T> eye(size_t(cols) * cols, T(0));
  for (int i = 0; i < cols; ++i) eye[size_t(i) * cols + i] = T(1);
  Buffer<T> eye_d(eye.size(), al), out(size_t(rows) * cols, al);
  al.copy_from_host(eye_d.data(), eye.data(), eye_d.bytes());
  ops.gemm(Trans::kNo, Trans::kNo, rows, cols, cols, T(1), x, cols, eye_d.data(), cols, T(0), out.data(), cols);
  std::vector<T> h(out.size());
  al.copy_to_host(h.data(), out.data(), out.bytes());
  return h;
}

template <typename T>
AttentionResult<T> run_attention(Ops<T>& ops, const AttentionCase<T>& c) {
  const AttentionShape& s = c.shape;
  const size_t NH = size_t(s.batch) * s.seq * s.ld, P = size_t(s.batch) * s.heads * s.seq * s.seq;
  Allocator& al = ops.allocator();
  Buffer<T> qkv(3 * NH, al), ctx(NH, al), d_ctx(NH, al), d_qkv(3 * NH, al), probs(P, al), probs_drop(P, al),
      scores(P, al), d_probs(P, al), d_scores(P, al), stats(size_t(s.batch) * s.heads * s.seq, al), bias(3 * s.ld, al);
  Buffer<int32_t> mask(c.mask.size(), al);
  al.copy_from_host(qkv.data(), c.qkv.data(), qkv.bytes());
  al.copy_from_host(d_ctx.data(), c.d_ctx.data(), d_ctx.bytes());
  al.copy_from_host(mask.data(), c.mask.data(), mask.bytes());
  d_qkv.zero();
  // The fields the forward's and the backward's arguments share (as the model's
  // attention_common fills them).
  auto common = [&](auto& x) {
    x.shape = s;
    x.scale = T(1) / std::sqrt(T(s.head_dim));
    x.dropout = c.dropout;
    x.dropout_key = c.key;
    x.key_mask = mask.data();
    x.q = qkv.data();
    x.k = qkv.data() + s.ld;
    x.v = qkv.data() + 2 * s.ld;
    x.probs = probs.data();
    x.probs_drop = c.dropout > 0 ? probs_drop.data() : nullptr;
    x.stats = stats.data();
  };
  AttentionForward<T> f;
  common(f);
  f.ctx = ctx.data();
  f.scores = scores.data();
  if (c.kept_io) {
    ops.keep_gemm_operand(qkv.data(), 3 * NH);
    f.qkv_kept = f.ctx_kept = true;
  }
  AttentionResult<T> r;
  r.impl = ops.attention_forward(f);
  const int rows = s.batch * s.seq;
  if (c.kept_io) {
    r.ctx = read_by_gemm(ops, ctx.data(), rows, s.ld);
    ops.keep_gemm_operand(d_ctx.data(), NH);
  }
  AttentionBackward<T> b;
  common(b);
  b.impl = r.impl;
  b.ctx = ctx.data();
  b.d_ctx = d_ctx.data();
  b.d_q = d_qkv.data();
  b.d_k = d_qkv.data() + s.ld;
  b.d_v = d_qkv.data() + 2 * s.ld;
  b.d_probs = d_probs.data();
  b.d_scores = d_scores.data();
  b.d_ctx_kept = c.kept_io;
  b.d_qkv_kept = c.d_qkv_kept;
  if (c.qkv_bias) {
    const std::vector<T> init(bias.size(), c.bias_init);
    al.copy_from_host(bias.data(), init.data(), bias.bytes());
    b.d_qkv_bias = bias.data();
  }
  ops.attention_backward(b);
  auto to_host = [&](const Buffer<T>& x) {
    std::vector<T> h(x.size());
    al.copy_to_host(h.data(), x.data(), x.bytes());
    return h;
  };
  if (!c.kept_io) r.ctx = to_host(ctx);
  r.d_qkv = c.d_qkv_kept ? read_by_gemm(ops, d_qkv.data(), rows, 3 * s.ld) : to_host(d_qkv);
  r.stats = to_host(stats);
  if (c.qkv_bias) r.d_qkv_bias = to_host(bias);
  ops.drop_gemm_operand(ctx.data());
  ops.drop_gemm_operand(d_qkv.data());
  return r;
}

// max |a - b| / max |b| (the comparison the attention tests use), over the finite values of b.
// Equal values, +inf included (the log-sum-exp of a row without keys), differ by 0; a NaN in
// either, or an inf in one only, gives 1e30. (std::max would drop a NaN, and an inf in b
// would divide every difference to 0.)
template <typename T>
double rel_max_diff(const std::vector<T>& a, const std::vector<T>& b) {
  double diff = 0, ref = 0;
  for (size_t i = 0; i < a.size() && i < b.size(); ++i) {
    const double x = double(a[i]), y = double(b[i]);
    if (std::isfinite(y)) ref = std::max(ref, std::abs(y));
    if (x == y) continue;
    diff = worse(diff, std::abs(x - y));
  }
  if (a.size() != b.size() || !std::isfinite(diff)) return 1e30;
  return ref > 0 ? diff / ref : diff;
}

}  // namespace lansbert::testing
