// CudaOps' attention entry points: the hand-written composition (attention_native.h) unless
// OpsOptions::attention asks for the flash attention (flash_attention.h), or for cuDNN, in
// which case FusedAttention runs where it applies.
// `auto` also compares each shape's first fused forward and backward with the hand-written
// results here (they need the other ops of this backend) and keeps the fused path only if
// they agree within kFused{Forward,Backward}Tolerance.
#include <algorithm>
#include <cstdio>
#include <string>

#include "cuda_check.cuh"
#include "cuda_ops.cuh"
#include "flash_attention.h"
#if LANSBERT_HAVE_CUDNN
#include "cudnn_api.h"
#endif

namespace lansbert::cuda {

namespace {

size_t rows_elems(const AttentionShape& s) { return size_t(s.batch) * s.seq * s.ld; }
// Elements from d_q (or d_k, d_v) to its last one: rows of heads*head_dim at qkv_stride()
// apart. With the model's packed [B*S, 3H] gradient the span also covers the other two
// blocks' columns, which the comparison then checks twice (and never reads past the end).
size_t qkv_span(const AttentionShape& s) {
  return (size_t(s.batch) * s.seq - 1) * size_t(s.qkv_stride()) + size_t(s.heads) * s.head_dim;
}
size_t stats_elems(const AttentionShape& s) { return size_t(s.batch) * s.heads * s.seq; }
size_t aligned(size_t bytes) { return (bytes + 255) / 256 * 256; }

void copy_async(float* dst, const float* src, size_t n, cudaStream_t s) {
  CUDA_CHECK(cudaMemcpyAsync(dst, src, n * sizeof(float), cudaMemcpyDeviceToDevice, s));
}

}  // namespace

FusedAttention& CudaOps::fused() {
  if (!fused_) fused_ = std::make_unique<FusedAttention>(options_.attention, stream());
  return *fused_;
}

bool CudaOps::attention_runs_flash(int head_dim) const {
  if (options_.attention != AttentionMode::kFlash) return false;
  int device = 0;
  CUDA_CHECK(cudaGetDevice(&device));
  AttentionShape shape;
  shape.head_dim = head_dim;
  return flash_attention_check(shape, options_.math, compute_capability(device)).empty();
}

AttentionImpl CudaOps::attention_forward(const AttentionForward<float>& a) {
  if (options_.attention == AttentionMode::kNative) return native_attention_forward(*this, a);
  if (options_.attention == AttentionMode::kFlash) {
    int device = 0;
    CUDA_CHECK(cudaGetDevice(&device));
    const std::string why = flash_attention_check(a.shape, options_.math, compute_capability(device));
    if (why != flash_fallback_ && !why.empty())
      std::fprintf(stderr, "lansbert: attention: precision.attention flash: hand-written attention (%s)\n", why.c_str());
    flash_fallback_ = why;
    if (!why.empty()) return native_attention_forward(*this, a);
    // With cast reuse the model made q, k, v as kept 16-bit copies only and wants ctx as one
    // (attention_reads_only_gemm_operands): the kernels read and write those.
    FlashHalfIO io;
    if (a.qkv_kept) {
      const size_t n = qkv_span(a.shape);
      io.q = kept_copy_of(a.q, n);
      io.k = kept_copy_of(a.k, n);
      io.v = kept_copy_of(a.v, n);
      LB_CHECK_MSG(io.q && io.k && io.v, "flash attention: q, k, v said kept have no 16-bit copy");
    }
    if (a.ctx_kept) {
      LB_CHECK_MSG(io.q, "flash attention: ctx kept without q, k, v kept");
      io.ctx_out = kept_output(a.ctx, rows_elems(a.shape));
    }
    flash_attention_forward(a, gemm_half_format(options_.math), io, stream());
    return AttentionImpl::kFlash;
  }
  FusedAttention& f = fused();
  if (!f.forward(a)) return native_attention_forward(*this, a);
  const bool dropout = a.dropout > 0;
  if (!f.needs_forward_check(a.shape, dropout)) return AttentionImpl::kFused;

  // auto, first use of this shape: set the fused results aside, run the hand-written forward
  // (which overwrites ctx and, without a.stats, the statistics at the start of probs) and
  // compare.
  const size_t n = rows_elems(a.shape), ns = stats_elems(a.shape);
  DeviceBytes keep(aligned(n * sizeof(float)) + ns * sizeof(float));
  float* ctx = static_cast<float*>(keep.get());
  float* stats = reinterpret_cast<float*>(static_cast<char*>(keep.get()) + aligned(n * sizeof(float)));
  copy_async(ctx, a.ctx, n, stream());
  float* saved = a.stats_slot();  // where the fused forward put its statistics
  copy_async(stats, saved, ns, stream());
  native_attention_forward(*this, a);
  const FusedAttention::Diff d = f.compare(ctx, a.ctx, n);
  f.record_check(a.shape, dropout, /*backward=*/false, d.rel());
  if (f.needs_forward_check(a.shape, dropout)) return AttentionImpl::kNative;  // failed: the native results stand
  copy_async(a.ctx, ctx, n, stream());
  copy_async(saved, stats, ns, stream());
  // The native forward kept the (dropped-out) probabilities as the P V operand; the fused
  // backward does not read them.
  drop_gemm_operand(dropout ? a.probs_drop : a.probs);
  // ... and q, k, v: a fused backward never drops them, and a later fallback's recomputed
  // scores would read this step's copies in a later step.
  if (!a.qkv_kept)
    attention_detail::for_each_qkv_span(a.shape, a.q, a.k, a.v, [&](const float* x, size_t) { drop_gemm_operand(x); });
  CUDA_CHECK(cudaStreamSynchronize(stream()));  // `keep` is freed on return
  return AttentionImpl::kFused;
}

void CudaOps::attention_backward(const AttentionBackward<float>& a) {
  if (a.impl == AttentionImpl::kNative) return native_attention_backward(*this, a);
  if (a.impl == AttentionImpl::kFlash) {
    // With d(ctx) kept, q, k, v and ctx are too (the forward's copies, dropped by the model
    // after this call for ctx, here for the rest, as the hand-written backward does).
    FlashHalfIO io;
    if (a.d_ctx_kept) {
      const size_t n = qkv_span(a.shape), nc = rows_elems(a.shape);
      io.q = kept_copy_of(a.q, n);
      io.k = kept_copy_of(a.k, n);
      io.v = kept_copy_of(a.v, n);
      io.d_ctx = kept_copy_of(a.d_ctx, nc);
      io.ctx_in = kept_copy_of(a.ctx, nc);
      LB_CHECK_MSG(io.q && io.k && io.v && io.d_ctx && io.ctx_in,
                   "flash attention backward: d(ctx) kept, but q, k, v, ctx or d(ctx) has no 16-bit copy");
    }
    // d(q, k, v) straight into their kept copies (AttentionBackward::d_qkv_kept) where the
    // inputs come from copies too; otherwise written in fp32 and kept after the kernels.
    const bool dqkv_copies = a.d_qkv_kept && io.q;
    if (dqkv_copies) {
      const size_t n = qkv_span(a.shape);
      int spans = 0;
      attention_detail::for_each_qkv_span(a.shape, a.d_q, a.d_k, a.d_v, [&](const float* x, size_t m) {
        kept_output(x, m);
        ++spans;
      });
      LB_CHECK_MSG(spans > 0, "flash attention backward: d(q, k, v) kept, but not laid out as kept spans");
      io.d_q = const_cast<uint16_t*>(kept_copy_of(a.d_q, n));
      io.d_k = const_cast<uint16_t*>(kept_copy_of(a.d_k, n));
      io.d_v = const_cast<uint16_t*>(kept_copy_of(a.d_v, n));
    }
    // The projection's bias sums from the kernels' blocks where they write d(q, k, v) as copies.
    float* bias_part = nullptr;
    if (a.d_qkv_bias) attention_detail::check_qkv_bias_layout(a);
    if (a.d_qkv_bias && dqkv_copies) {
      column_partials_.reserve(flash_bias_partials(a.shape) * sizeof(float));
      bias_part = static_cast<float*>(column_partials_.get());
    }
    // d_probs is scratch of at least B*A*S floats ([B, A, S] where the model lays out no
    // probabilities, Ops::attention_runs_flash): its first B*A*S hold D.
    flash_attention_backward(a, gemm_half_format(options_.math), io, a.d_probs, bias_part, stream());
    if (a.d_qkv_kept && !dqkv_copies)
      attention_detail::for_each_qkv_span(a.shape, a.d_q, a.d_k, a.d_v,
                                          [&](const float* x, size_t m) { keep_gemm_operand(x, m); });
    if (a.d_qkv_bias && !dqkv_copies)
      bias_add_backward_of_kept(a.d_q, a.d_qkv_bias, a.shape.batch * a.shape.seq, 3 * a.shape.ld);
    if (a.d_ctx_kept) {
      drop_gemm_operand(a.d_ctx);
      attention_detail::for_each_qkv_span(a.shape, a.q, a.k, a.v, [&](const float* x, size_t) { drop_gemm_operand(x); });
    }
    return;
  }
  LB_CHECK_MSG(options_.attention != AttentionMode::kNative, "attention_backward: a fused forward on native ops");
  LB_CHECK_MSG(!a.d_qkv_bias, "attention_backward: cuDNN's path does not take d_qkv_bias");
  FusedAttention& f = fused();
  const bool dropout = a.dropout > 0;
  const bool check = f.needs_backward_check(a.shape, dropout);
  const bool ran = f.backward(a);
  if (ran && !check) return;

  // The hand-written backward after a fused forward (the fused one failed, or `auto` wants a
  // reference): `probs` holds no probabilities (the statistics, or with a.stats another
  // layer's probabilities in the slot the layers share), so recompute them into it (and, with
  // dropout, the dropped-out ones from the same key into probs_drop, kept as the native
  // forward keeps them). The slot is sized for them, and nothing reads the statistics or the
  // other layer's contents after this point.
  const size_t n = qkv_span(a.shape);
  DeviceBytes keep(check && ran ? 3 * aligned(n * sizeof(float)) : 0);
  float* fused_grads[3] = {nullptr, nullptr, nullptr};
  float* outs[3] = {a.d_q, a.d_k, a.d_v};
  if (check && ran)
    for (int i = 0; i < 3; ++i) {
      fused_grads[i] = reinterpret_cast<float*>(static_cast<char*>(keep.get()) + i * aligned(n * sizeof(float)));
      copy_async(fused_grads[i], outs[i], n, stream());
    }
  const AttentionShape& s = a.shape;
  float* probs = const_cast<float*>(a.probs);
  const int Q = s.qkv_stride();
  gemm_batched(Trans::kNo, Trans::kYes, s.seq, s.seq, s.head_dim, 1.0f, a.q, Q, a.k, Q, 0.0f, a.d_scores, s.seq,
               attention_detail::qk_batch(s, Q, Q));
  if (dropout) {
    softmax_dropout_forward_kept(a.d_scores, a.key_mask, probs, const_cast<float*>(a.probs_drop), s.batch, s.heads,
                                 s.seq, a.scale, a.dropout, a.dropout_key);
  } else {
    softmax_forward(a.d_scores, a.key_mask, probs, s.batch, s.heads, s.seq, a.scale);
    keep_gemm_operand(probs, attention_detail::probs_size(s));  // new contents; the native backward drops it
  }
  AttentionBackward<float> native = a;
  native.impl = AttentionImpl::kNative;
  native_attention_backward(*this, native);
  if (!(check && ran)) return;
  double worst = 0;
  for (int i = 0; i < 3; ++i) {
    const double rel = f.compare(fused_grads[i], outs[i], n).rel();
    worst = rel > worst || rel != rel ? rel : worst;  // keeps a NaN
  }
  f.record_check(a.shape, dropout, /*backward=*/true, worst);
}

std::string fused_attention_availability() {
  if (device_count() == 0) return "unavailable: no CUDA device visible";
  OpsOptions o;
  o.attention = AttentionMode::kCudnn;
  CudaOps ops(o);
  return ops.fused().availability();
}

std::string cudnn_library_status() {
#if LANSBERT_HAVE_CUDNN
  const CudnnApi& api = cudnn_api();
  if (!api.ok()) return "not loadable: " + api.error;
  return cudnn_version_string(api.version) + " (" + api.path + ", opened at run time)";
#else
  return "not built (no cuDNN headers at configure time, or LANSBERT_CUDNN=OFF)";
#endif
}

}  // namespace lansbert::cuda
