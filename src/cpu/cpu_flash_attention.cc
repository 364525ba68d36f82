// The CPU twin of the flash attention (cuda/flash_attention.cu): the same online softmax over
// key tiles of kern::kFlashKeyTile and the same per-element bodies (kernels/flash_attention.h),
// with the roundings the GPU's tensor cores see where GEMMs are 16-bit: q, k, v and d(ctx) as
// operands, the dropped-out probabilities before they multiply v or d(ctx), and d(scores)
// before it multiplies k or q. Products are summed in T (the GPU sums in fp32, in another
// order), so the two agree to rounding, not bit for bit. Elements a query does not see
// (kern::attention_visible: padding keys, another packed sequence's keys) are skipped, as the
// kernels skip whole tiles: their probability is 0, so they add nothing (the same bits, but
// for a NaN or inf at a position nobody sees, which no longer spreads). One task per (sequence, head); each
// runs its loops in a fixed order, so results do not depend on the thread count.
#include <algorithm>
#include <utility>
#include <vector>

#include "cpu_ops_impl.h"
#include "lansbert/kernels/flash_attention.h"
#include "lansbert/kernels/half.h"

namespace lansbert::cpu {

namespace {

// One head's rows gathered from [B*S, ld] activations into a dense [S, D] block.
template <typename T>
void gather_head(const T* x, int ld, int64_t b, int a, int S, int D, T* out) {
  for (int s = 0; s < S; ++s) std::copy_n(x + (b * S + s) * ld + int64_t(a) * D, D, out + int64_t(s) * D);
}
template <typename T>
void scatter_head(const T* in, int ld, int64_t b, int a, int S, int D, T* x) {
  for (int s = 0; s < S; ++s) std::copy_n(in + int64_t(s) * D, D, x + (b * S + s) * ld + int64_t(a) * D);
}
template <typename T>
T dot(const T* x, const T* y, int n) {
  T sum = 0;
  for (int i = 0; i < n; ++i) sum += x[i] * y[i];
  return sum;
}
template <typename T>
void axpy(T alpha, const T* x, T* y, int n) {
  for (int i = 0; i < n; ++i) y[i] += alpha * x[i];
}

// AttentionBackward::d_qkv_bias as the CUDA kernels add it: per sequence and tile of
// kern::kFlashRowTile rows, each column's values in row order (add_bias_partial), then those
// partials in (sequence, tile) order into sums[c] (column_finish_kernel). x: [batch * seq, cols].
template <typename T>
void add_tiled_column_sums(const T* x, int batch, int seq, int cols, T* sums) {
  std::vector<T> total(cols, T(0)), part(cols);
  for (int b = 0; b < batch; ++b)
    for (int r0 = 0; r0 < seq; r0 += kern::kFlashRowTile) {
      std::fill(part.begin(), part.end(), T(0));
      for (int r = r0; r < std::min(seq, r0 + kern::kFlashRowTile); ++r)
        for (int c = 0; c < cols; ++c) part[c] += x[(size_t(b) * seq + r) * cols + c];
      for (int c = 0; c < cols; ++c) total[c] += part[c];
    }
  for (int c = 0; c < cols; ++c) sums[c] += total[c];
}

}  // namespace

template <typename T>
T CpuOps<T>::gemm_rounded(T x) const {
  if (!is_half_gemm(math_)) return x;
  const kern::HalfFormat f = gemm_half_format(math_);
  return static_cast<T>(kern::round_to_half(static_cast<float>(x), f));
}

template <typename T>
const T* CpuOps<T>::kept_copy_of(const T* x, size_t n) const {
  size_t offset = 0;
  const std::vector<T>* copy = kept_.find(x, n, &offset);
  LB_CHECK_MSG(copy != nullptr, "an operand said kept has no 16-bit copy");
  return copy->data() + offset;
}

// With cast reuse (attention_reads_only_gemm_operands) the model made q, k, v as kept copies
// only, wants ctx as one, and made d(ctx) as one: the twin reads and writes those, as the
// kernels do (their values are already rounded; rounding them again changes nothing).
template <typename T>
void CpuOps<T>::flash_attention_forward(const AttentionForward<T>& a) {
  const AttentionShape& s = a.shape;
  const int S = s.seq, D = s.head_dim, A = s.heads, Q = s.qkv_stride();
  const int64_t heads = int64_t(s.batch) * A;
  T* stats = a.stats_slot();
  // q, k, v: rows of heads * head_dim at Q apart, as the GEMMs that made them see them.
  const size_t qkv_n = gemm_operand_extent(Trans::kNo, s.batch * S, A * D, Q);
  const T* q_in = a.qkv_kept ? kept_copy_of(a.q, qkv_n) : a.q;
  const T* k_in = a.qkv_kept ? kept_copy_of(a.k, qkv_n) : a.k;
  const T* v_in = a.qkv_kept ? kept_copy_of(a.v, qkv_n) : a.v;
  std::vector<T>* ctx_copy = a.ctx_kept ? kept_output(a.ctx, size_t(s.batch) * S * s.ld) : nullptr;
  T* ctx_out = ctx_copy ? ctx_copy->data() : a.ctx;
#pragma omp parallel for schedule(dynamic) if (heads > 1)
  for (int64_t bh = 0; bh < heads; ++bh) {
    const int64_t b = bh / A;
    const int h = int(bh % A);
    std::vector<T> q(size_t(S) * D), k(q.size()), v(q.size()), out(q.size()), acc(D);
    std::vector<T> score(kern::kFlashKeyTile);
    gather_head(q_in, Q, b, h, S, D, q.data());
    gather_head(k_in, Q, b, h, S, D, k.data());
    gather_head(v_in, Q, b, h, S, D, v.data());
    for (T* x : {q.data(), k.data(), v.data()})
      for (size_t i = 0; i < q.size(); ++i) x[i] = gemm_rounded(x[i]);
    const int32_t* mask = a.key_mask + b * S;
    kern::DropoutBits bits(a.dropout_key);
    for (int r = 0; r < S; ++r) {
      T m = -kern::flash_infinity<T>(), l = 0;
      std::fill(acc.begin(), acc.end(), T(0));
      for (int k0 = 0; k0 < S; k0 += kern::kFlashKeyTile) {
        const int k1 = std::min(S, k0 + kern::kFlashKeyTile);
        T tile_max = -kern::flash_infinity<T>();
        bool seen = false;
        for (int j = k0; j < k1; ++j) {
          if (!kern::attention_visible(mask[j], mask[r])) continue;
          seen = true;
          score[j - k0] = dot(&q[size_t(r) * D], &k[size_t(j) * D], D);
          tile_max = std::max(tile_max, a.scale * score[j - k0]);
        }
        // Keys the row does not see have p = 0 and change neither l nor acc (a tile of only
        // those leaves the max, so alpha is 1, or 0 on zeros): skipping them gives the same bits.
        if (!seen) continue;
        const T m_new = kern::flash_new_max(m, tile_max), alpha = kern::flash_rescale(m, m_new);
        l *= alpha;
        for (T& x : acc) x *= alpha;
        for (int j = k0; j < k1; ++j) {
          if (!kern::attention_visible(mask[j], mask[r])) continue;
          const T p = kern::flash_exp(score[j - k0], true, a.scale, m_new);
          l += p;
          const uint32_t z = a.dropout > 0 ? bits(kern::flash_prob_index(bh, S, r, j)) : 0;
          axpy(gemm_rounded(kern::flash_dropped(p, z, a.dropout)), &v[size_t(j) * D], acc.data(), D);
        }
        m = m_new;
      }
      const T inv = kern::flash_inv_sum(l);
      for (int d = 0; d < D; ++d) out[size_t(r) * D + d] = acc[d] * inv;
      stats[bh * S + r] = kern::flash_lse(m, l);
    }
    scatter_head(out.data(), s.ld, b, h, S, D, ctx_out);
  }
  if (ctx_copy) round_values(ctx_copy->data(), size_t(s.batch) * S * s.ld, ctx_copy->data());
}

template <typename T>
void CpuOps<T>::flash_attention_backward(const AttentionBackward<T>& a) {
  const AttentionShape& s = a.shape;
  const int S = s.seq, D = s.head_dim, A = s.heads, Q = s.qkv_stride(), H = s.ld;
  const int64_t heads = int64_t(s.batch) * A;
  const T* stats = a.stats_slot();
  const size_t qkv_n = gemm_operand_extent(Trans::kNo, s.batch * S, A * D, Q);
  const size_t rows_n = gemm_operand_extent(Trans::kNo, s.batch * S, A * D, H);
  const bool kept = a.d_ctx_kept;
  const T* q_in = kept ? kept_copy_of(a.q, qkv_n) : a.q;
  const T* k_in = kept ? kept_copy_of(a.k, qkv_n) : a.k;
  const T* v_in = kept ? kept_copy_of(a.v, qkv_n) : a.v;
  const T* d_ctx_in = kept ? kept_copy_of(a.d_ctx, rows_n) : a.d_ctx;
  const T* ctx_in = kept ? kept_copy_of(a.ctx, rows_n) : a.ctx;
  // d(q, k, v) into their kept copies (AttentionBackward::d_qkv_kept), as the kernels write
  // them: the fp32 results rounded once, after the loop below.
  std::vector<std::pair<T*, size_t>> dqkv_spans;
  if (a.d_qkv_kept && kept)
    attention_detail::for_each_qkv_span(s, a.d_q, a.d_k, a.d_v, [&](const T* x, size_t m) {
      std::vector<T>* copy = kept_output(x, m);
      LB_CHECK_MSG(copy != nullptr, "flash attention backward: d(q, k, v) kept without kept copies");
      dqkv_spans.emplace_back(copy->data(), m);
    });
  LB_CHECK_MSG(!a.d_qkv_kept || !kept || !dqkv_spans.empty(),
               "flash attention backward: d(q, k, v) kept, but not laid out as kept spans");
  T* const d_q = dqkv_spans.empty() ? a.d_q : const_cast<T*>(kept_copy_of(a.d_q, qkv_n));
  T* const d_k = dqkv_spans.empty() ? a.d_k : const_cast<T*>(kept_copy_of(a.d_k, qkv_n));
  T* const d_v = dqkv_spans.empty() ? a.d_v : const_cast<T*>(kept_copy_of(a.d_v, qkv_n));
#pragma omp parallel for schedule(dynamic) if (heads > 1)
  for (int64_t bh = 0; bh < heads; ++bh) {
    const int64_t b = bh / A;
    const int h = int(bh % A);
    const size_t n = size_t(S) * D;
    std::vector<T> q(n), k(n), v(n), dout(n), ctx(n), dq(n, T(0)), dk(n, T(0)), dv(n, T(0)), row_d(S);
    gather_head(q_in, Q, b, h, S, D, q.data());
    gather_head(k_in, Q, b, h, S, D, k.data());
    gather_head(v_in, Q, b, h, S, D, v.data());
    gather_head(d_ctx_in, H, b, h, S, D, dout.data());
    gather_head(ctx_in, H, b, h, S, D, ctx.data());
    // D = d(ctx) . ctx per row, from the values as stored (the GPU's first kernel).
    for (int r = 0; r < S; ++r) row_d[r] = dot(&dout[size_t(r) * D], &ctx[size_t(r) * D], D);
    for (T* x : {q.data(), k.data(), v.data(), dout.data()})
      for (size_t i = 0; i < n; ++i) x[i] = gemm_rounded(x[i]);
    const int32_t* mask = a.key_mask + b * S;
    kern::DropoutBits bits(a.dropout_key);
    for (int r = 0; r < S; ++r) {
      const T lse = stats[bh * S + r];
      const T* qr = &q[size_t(r) * D];
      const T* dor = &dout[size_t(r) * D];
      for (int j = 0; j < S; ++j) {
        // An element the query does not see has p = 0, so pd = ds = 0: it adds nothing to d(q,k,v).
        if (!kern::attention_visible(mask[j], mask[r])) continue;
        const T p = kern::flash_prob(dot(qr, &k[size_t(j) * D], D), true, a.scale, lse);
        const uint32_t z = a.dropout > 0 ? bits(kern::flash_prob_index(bh, S, r, j)) : 0;
        const T pd = gemm_rounded(kern::flash_dropped(p, z, a.dropout));
        const T dpd = dot(dor, &v[size_t(j) * D], D);
        const T ds = gemm_rounded(kern::flash_dscore(p, dpd, z, a.dropout, row_d[r], a.scale));
        axpy(pd, dor, &dv[size_t(j) * D], D);
        axpy(ds, qr, &dk[size_t(j) * D], D);
        axpy(ds, &k[size_t(j) * D], &dq[size_t(r) * D], D);
      }
    }
    scatter_head(dq.data(), Q, b, h, S, D, d_q);
    scatter_head(dk.data(), Q, b, h, S, D, d_k);
    scatter_head(dv.data(), Q, b, h, S, D, d_v);
  }
  for (auto [copy, m] : dqkv_spans) round_values(copy, m, copy);
  if (a.d_qkv_kept && dqkv_spans.empty())
    attention_detail::for_each_qkv_span(s, a.d_q, a.d_k, a.d_v, [&](const T* x, size_t m) { this->keep_gemm_operand(x, m); });
  if (a.d_qkv_bias) {
    attention_detail::check_qkv_bias_layout(a);
    // As the device: summed from the copies where the kernels write them, else by the op.
    if (!dqkv_spans.empty())
      add_tiled_column_sums(d_q, s.batch, S, 3 * H, a.d_qkv_bias);
    else
      this->bias_add_backward_of_kept(a.d_q, a.d_qkv_bias, s.batch * S, 3 * H);
  }
  if (kept) {  // the forward's copies, as the hand-written backward drops them (ctx: the model)
    this->drop_gemm_operand(a.d_ctx);
    attention_detail::for_each_qkv_span(s, a.q, a.k, a.v, [&](const T* x, size_t) { this->drop_gemm_operand(x); });
  }
}

template <typename T>
AttentionImpl CpuOps<T>::attention_forward(const AttentionForward<T>& a) {
  if (attention_ != AttentionMode::kFlash) return native_attention_forward(*this, a);
  flash_attention_forward(a);
  return AttentionImpl::kFlash;
}

template <typename T>
void CpuOps<T>::attention_backward(const AttentionBackward<T>& a) {
  if (a.impl != AttentionImpl::kFlash) return Ops<T>::attention_backward(a);
  flash_attention_backward(a);
}

template class CpuOps<float>;
template class CpuOps<double>;

}  // namespace lansbert::cpu
