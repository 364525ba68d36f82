// FusedAttention (fused_attention.h): when cuDNN's SDPA may run, the plan cache, the bf16
// staging, and the fallback log. The graphs themselves are in cudnn_sdpa_graphs.cc.
#include "fused_attention.h"

#include <cstdio>
#include <cstring>
#include <initializer_list>
#include <limits>
#include <map>
#include <set>
#include <tuple>
#include <vector>

#include "cuda_api.h"
#include "cuda_check.cuh"
#include "cuda_raii.cuh"
#include "dropout_map.cuh"
#include "launch.cuh"
#include "lansbert/kernels/dropout.h"
#include "lansbert/kernels/half.h"

#if LANSBERT_HAVE_CUDNN
#include "cudnn_sdpa_graphs.h"
#endif

namespace lansbert::cuda {

namespace {

#if LANSBERT_HAVE_CUDNN
std::string shape_text(const AttentionShape& s) {
  return "B=" + std::to_string(s.batch) + " heads=" + std::to_string(s.heads) + " S=" + std::to_string(s.seq) +
         " D=" + std::to_string(s.head_dim);
}

// fp32 <-> bf16 with the shared rounding (kern::float_to_bf16: nearest, ties to even).
void to_bf16(const float* src, uint16_t* dst, size_t n, cudaStream_t s) {
  launch_map(n, s, [=] __device__(size_t i) { dst[i] = kern::float_to_bf16(src[i]); });
}
void to_f32(const uint16_t* src, float* dst, size_t n, cudaStream_t s) {
  launch_map(n, s, [=] __device__(size_t i) { dst[i] = kern::bf16_to_float(src[i]); });
}
// The same between a [rows, cols] block of an fp32 tensor with row stride ld (q, k, v and
// their gradients: column blocks of the model's [B*S, 3H] tensors) and a packed bf16 copy.
void rows_to_bf16(const float* src, int64_t ld, uint16_t* dst, size_t rows, size_t cols, cudaStream_t s) {
  launch_map(rows * cols, s, [=] __device__(size_t i) {
    dst[i] = kern::float_to_bf16(src[int64_t(i / cols) * ld + int64_t(i % cols)]);
  });
}
void rows_to_f32(const uint16_t* src, float* dst, int64_t ld, size_t rows, size_t cols, cudaStream_t s) {
  launch_map(rows * cols, s, [=] __device__(size_t i) {
    dst[int64_t(i / cols) * ld + int64_t(i % cols)] = kern::bf16_to_float(src[i]);
  });
}

void fill_int(int32_t* p, size_t n, int32_t value, cudaStream_t s) {
  launch_map(n, s, [=] __device__(size_t i) { p[i] = value; });
}

// The attention dropout's keep mask as cuDNN reads it: bf16 [B, H, S, S], 1 where element i
// of the probabilities is kept, 0 where dropped; the same decision (kern::dropout_keep_bits
// on the same Philox stream, element = flat index) as the hand-written softmax+dropout and
// the CPU, so the fused path drops exactly the elements they drop.
void fill_keep_mask(uint16_t* mask, size_t n, float p, RngKey key, cudaStream_t s) {
  constexpr uint16_t kOneBf16 = 0x3F80;
  launch_dropout_map(n, key, s, [=] __device__(size_t i, uint32_t bits) {
    mask[i] = kern::dropout_keep_bits(bits, p) ? kOneBf16 : uint16_t(0);
  });
}
#endif

void log_line(const std::string& msg) { std::fprintf(stderr, "lansbert: attention: %s\n", msg.c_str()); }

// max |a - b| and max |b| as float bit patterns (non-negative floats order like their bits;
// a NaN difference counts as +inf so that it can never pass a check).
__global__ void diff_kernel(const float* a, const float* b, size_t n, unsigned* out) {
  float d = 0, r = 0;
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < n; i += size_t(gridDim.x) * blockDim.x) {
    float e = fabsf(a[i] - b[i]);
    if (!(e <= 3.0e38f)) e = __int_as_float(0x7f800000);
    d = fmaxf(d, e);
    r = fmaxf(r, fabsf(b[i]));
  }
  d = warp_max(d);
  r = warp_max(r);
  if ((threadIdx.x & 31) == 0) {
    atomicMax(&out[0], __float_as_uint(d));
    atomicMax(&out[1], __float_as_uint(r));
  }
}

}  // namespace

std::string fused_attention_argument_check(const AttentionShape& s, float dropout, bool have_key_lengths) {
  if (!(dropout >= 0 && dropout < 1)) return "attention dropout " + std::to_string(dropout) + " outside [0, 1)";
  if (!have_key_lengths)
    return "the key mask is not a prefix of real tokens in every row (the fused path takes lengths; packed rows "
           "hold several sequences)";
  if (s.head_dim % 8 != 0 || s.head_dim > 128)
    return "head_dim " + std::to_string(s.head_dim) + " (cuDNN's SDPA needs a multiple of 8, at most 128)";
  if (s.ld != s.heads * s.head_dim)
    return "ctx row stride " + std::to_string(s.ld) + " != heads * head_dim (the fused path converts whole rows)";
  if (s.qkv_stride() < s.ld) return "q/k/v row stride " + std::to_string(s.qkv_stride()) + " < heads * head_dim";
  if (s.batch <= 0 || s.seq <= 0) return "empty batch";
  return "";
}

#if LANSBERT_HAVE_CUDNN

struct FusedAttention::Impl {
  struct Entry {
    std::string why;  // empty: both plans built
    sdpa::GraphKind fwd_kind = sdpa::GraphKind::kComposite, bwd_kind = sdpa::GraphKind::kComposite;
    dnn::Plan fwd, bwd;
    bool fwd_checked = false, bwd_checked = false;
  };
  using Key = std::tuple<int, int, int, int, int, bool>;  // the shape, and whether with dropout

  bool probed = false;
  std::string unavailable;  // why cuDNN cannot be used at all (after probing)
  std::string description;
  cudnnHandle_t handle = nullptr;
  std::map<Key, Entry> entries;
  std::string disabled;  // set when an `auto` comparison failed: the fused path is off
  std::set<std::string> logged;
  DeviceBytes staging;       // bf16 Q, K, V, O (forward) and dO, dQ, dK, dV (backward)
  DeviceBytes workspace;     // cuDNN's
  DeviceBytes spill;         // backward softmax_sum and dQ accumulator (composite graph)
  DeviceBytes keep_mask;     // with dropout: bf16 [B, H, S, S], refilled for each call
  DeviceBytes seq_len_q;     // B copies of S
  int seq_len_q_b = 0, seq_len_q_s = 0;
  DeviceBytes diff;          // compare()'s two results

  ~Impl() {
    entries.clear();  // plans before the handle
    if (handle) cudnn_api().Destroy(handle);
  }

  static Key key(const AttentionShape& s, bool dropout) {
    return {s.batch, s.heads, s.seq, s.head_dim, s.ld, dropout};
  }

  void probe(cudaStream_t stream) {
    if (probed) return;
    probed = true;
    const CudnnApi& api = cudnn_api();
    if (!api.ok()) {
      unavailable = api.error;
      return;
    }
    description = "cuDNN " + cudnn_version_string(api.version) + " (" + api.path + ")";
    if (api.version < 91002) {
      unavailable = description + " is older than 9.10.2, the oldest this path is written for";
      return;
    }
    int dev = 0;
    const int cc = cudaGetDevice(&dev) == cudaSuccess ? compute_capability(dev) : 0;
    if (cc == 0) {
      cudaGetLastError();
      unavailable = "cannot query the device";
      return;
    }
    if (cc < 80) {
      unavailable = "sm_" + std::to_string(cc) + ": cuDNN's fused attention needs sm_80+";
      return;
    }
    cudnnStatus_t st = api.Create(&handle);
    if (st == CUDNN_STATUS_SUCCESS) st = api.SetStream(handle, stream);
    if (st != CUDNN_STATUS_SUCCESS) unavailable = "cudnnCreate/cudnnSetStream: " + api.describe(st);
  }

  // Both plans for this shape, built on first use; null with *why set when there are none.
  Entry* entry(const AttentionShape& s, bool dropout, std::string* why) {
    auto it = entries.find(key(s, dropout));
    if (it == entries.end()) it = entries.emplace(key(s, dropout), build(s, dropout)).first;
    if (!it->second.why.empty()) {
      *why = it->second.why;
      return nullptr;
    }
    return &it->second;
  }

  // The first of `kinds` this cuDNN has and finds an engine for: true with *plan and *kind
  // set, else false with each kind's reason appended to *notes.
  bool first_plan(std::initializer_list<sdpa::GraphKind> kinds, bool backward, const sdpa::Dims& d, bool dropout,
                  dnn::Plan* plan, sdpa::GraphKind* kind, std::string* notes) {
    const size_t version = cudnn_api().version;
    for (sdpa::GraphKind k : kinds) {
      const size_t need = sdpa::min_version(k, backward);
      if (need == 0 || version < need) continue;
      dnn::GraphBuilder g;
      if (backward)
        sdpa::add_backward(g, k, d, dropout);
      else
        sdpa::add_forward(g, k, d, dropout);
      if (g.build_plan(handle, plan)) {
        *kind = k;
        return true;
      }
      *notes += std::string(notes->empty() ? "" : "; ") + sdpa::name(k) + ": " + g.error();
    }
    return false;
  }

  Entry build(const AttentionShape& s, bool dropout) {
    Entry e;
    const sdpa::Dims d{s.batch, s.heads, s.seq, s.head_dim, s.ld};
    using sdpa::GraphKind;
    std::string fwd_notes, bwd_notes;
    // The forward node first (what cudnn_frontend prefers where it exists); the backward
    // composite first (the backward node had no engines on Hopper when this was written).
    // With dropout only the composite graphs apply (the unified node takes no mask).
    const std::string what = shape_text(s) + (dropout ? " with dropout" : "");
    if (!first_plan({GraphKind::kUnified, GraphKind::kComposite}, false, d, dropout, &e.fwd, &e.fwd_kind, &fwd_notes))
      e.why = "no cuDNN forward plan for " + what + " (" + fwd_notes + ")";
    else if (!first_plan({GraphKind::kComposite, GraphKind::kUnified}, true, d, dropout, &e.bwd, &e.bwd_kind,
                         &bwd_notes))
      e.why = "no cuDNN backward plan for " + what + " (" + bwd_notes + ")";
    else
      log_once("cuDNN fused attention for " + what + " with " + description + ": forward " +
               sdpa::name(e.fwd_kind) + " (" + e.fwd.engine + "), backward " + sdpa::name(e.bwd_kind) + " (" +
               e.bwd.engine + ")");
    return e;
  }

  void log_once(const std::string& msg) {
    if (logged.insert(msg).second) log_line(msg);
  }

  const int32_t* lengths_q(int b, int s, cudaStream_t stream) {
    if (b != seq_len_q_b || s != seq_len_q_s) {
      seq_len_q.reserve(size_t(b) * sizeof(int32_t));
      fill_int(static_cast<int32_t*>(seq_len_q.get()), size_t(b), s, stream);
      seq_len_q_b = b;
      seq_len_q_s = s;
    }
    return static_cast<const int32_t*>(seq_len_q.get());
  }

  // The keep mask of this call's dropout (fill_keep_mask), in `keep_mask`.
  uint16_t* dropout_mask(const AttentionShape& s, float p, RngKey key, cudaStream_t stream) {
    const size_t n = size_t(s.batch) * s.heads * s.seq * s.seq;
    keep_mask.reserve(n * sizeof(uint16_t));
    uint16_t* mask = static_cast<uint16_t*>(keep_mask.get());
    fill_keep_mask(mask, n, p, key, stream);
    return mask;
  }

  void* cudnn_workspace(int64_t bytes) {
    workspace.reserve(size_t(bytes > 0 ? bytes : 1));
    return workspace.get();
  }
};

FusedAttention::FusedAttention(AttentionMode mode, cudaStream_t stream)
    : mode_(mode), stream_(stream), impl_(std::make_unique<Impl>()) {}

FusedAttention::~FusedAttention() = default;

std::string FusedAttention::availability() {
  impl_->probe(stream_);
  return impl_->unavailable.empty() ? impl_->description : "unavailable: " + impl_->unavailable;
}

void FusedAttention::fall_back(const std::string& reason) {
  last_fallback_ = reason;
  impl_->log_once("precision.attention " + std::string(attention_mode_name(mode_)) + ": hand-written attention (" +
                  reason + ")");
}

bool FusedAttention::forward(const AttentionForward<float>& a) {
  std::string why = fused_attention_argument_check(a.shape, a.dropout, a.key_lengths != nullptr);
  Impl& m = *impl_;
  if (why.empty()) m.probe(stream_);
  if (why.empty() && !m.unavailable.empty()) why = m.unavailable;
  if (why.empty() && !m.disabled.empty()) why = m.disabled;
  const bool dropout = a.dropout > 0;
  Impl::Entry* e = why.empty() ? m.entry(a.shape, dropout, &why) : nullptr;
  if (!e) {
    fall_back(why);
    return false;
  }
  const AttentionShape& s = a.shape;
  const size_t n = size_t(s.batch) * s.seq * s.ld;
  m.staging.reserve(4 * n * sizeof(uint16_t));
  uint16_t* q = static_cast<uint16_t*>(m.staging.get());
  uint16_t *k = q + n, *v = k + n, *o = v + n;
  const size_t rows = size_t(s.batch) * s.seq;
  rows_to_bf16(a.q, s.qkv_stride(), q, rows, s.ld, stream_);
  rows_to_bf16(a.k, s.qkv_stride(), k, rows, s.ld, stream_);
  rows_to_bf16(a.v, s.qkv_stride(), v, rows, s.ld, stream_);
  // Masked scores become -inf, the fill cudnn_frontend uses from cuDNN 9.10 (our floor; it
  // used lowest() before). No row is wholly masked, so Stats stays finite: every query row
  // is valid, and key lengths come only when each is at least 1 (bert_model.cc).
  float scale = a.scale, fill = -std::numeric_limits<float>::infinity();
  std::vector<int64_t> uids = {sdpa::kQ, sdpa::kK, sdpa::kV, sdpa::kO, sdpa::kStats, sdpa::kScale,
                               sdpa::kSeqLenQ, sdpa::kSeqLenKV};
  std::vector<void*> ptrs = {q, k, v, o, a.stats_slot(), &scale, const_cast<int32_t*>(m.lengths_q(s.batch, s.seq, stream_)),
                             const_cast<int32_t*>(a.key_lengths)};
  if (e->fwd_kind == sdpa::GraphKind::kComposite) {
    uids.push_back(sdpa::kNegInf);
    ptrs.push_back(&fill);
  }
  float keep_scale = 1.0f / (1.0f - a.dropout);  // r of kern::dropout_scale, in fp32 as there
  if (dropout) {
    uids.insert(uids.end(), {sdpa::kDropMask, sdpa::kDropScale});
    ptrs.insert(ptrs.end(), {m.dropout_mask(s, a.dropout, a.dropout_key, stream_), &keep_scale});
  }
  const std::string err = dnn::execute(m.handle, e->fwd, uids, ptrs, m.cudnn_workspace(e->fwd.workspace));
  if (!err.empty()) {
    e->why = "cuDNN forward failed for " + shape_text(s) + ": " + err;
    fall_back(e->why);
    return false;
  }
  to_f32(o, a.ctx, n, stream_);
  last_fallback_.clear();
  return true;
}

bool FusedAttention::backward(const AttentionBackward<float>& a) {
  Impl& m = *impl_;
  // An `auto` comparison that failed (typically this step's first backward, the last layer's)
  // switches the fused path off for the backwards still to come too: the layers whose
  // forwards already ran fused recompute their probabilities and take the hand-written one.
  std::string why = m.disabled;
  const bool dropout = a.dropout > 0;
  Impl::Entry* e = why.empty() ? m.entry(a.shape, dropout, &why) : nullptr;
  if (!e) {
    fall_back(why);
    return false;
  }
  const AttentionShape& s = a.shape;
  const size_t n = size_t(s.batch) * s.seq * s.ld;
  m.staging.reserve(8 * n * sizeof(uint16_t));
  uint16_t* q = static_cast<uint16_t*>(m.staging.get());
  uint16_t *k = q + n, *v = k + n, *o = v + n, *d_o = o + n, *dq = d_o + n, *dk = dq + n, *dv = dk + n;
  const size_t rows = size_t(s.batch) * s.seq;
  rows_to_bf16(a.q, s.qkv_stride(), q, rows, s.ld, stream_);
  rows_to_bf16(a.k, s.qkv_stride(), k, rows, s.ld, stream_);
  rows_to_bf16(a.v, s.qkv_stride(), v, rows, s.ld, stream_);
  to_bf16(a.ctx, o, n, stream_);  // exact: ctx is the bf16 O the forward widened
  to_bf16(a.d_ctx, d_o, n, stream_);
  // Rows of padded keys get no gradient; the kernels may leave them unwritten.
  CUDA_CHECK(cudaMemsetAsync(dq, 0, 3 * n * sizeof(uint16_t), stream_));
  float scale = a.scale, fill = -std::numeric_limits<float>::infinity();  // as the forward
  float keep_scale = 1.0f / (1.0f - a.dropout), keep_rate = 1.0f - a.dropout;  // r and 1 - p (1 without dropout)
  std::vector<int64_t> uids = {sdpa::kQ,     sdpa::kK,       sdpa::kV,        sdpa::kO,  sdpa::kDO,
                               sdpa::kStats, sdpa::kScale,   sdpa::kSeqLenQ,  sdpa::kSeqLenKV,
                               sdpa::kDQ,    sdpa::kDK,      sdpa::kDV};
  std::vector<void*> ptrs = {q, k, v, o, d_o, const_cast<float*>(a.stats_slot()), &scale,
                             const_cast<int32_t*>(m.lengths_q(s.batch, s.seq, stream_)),
                             const_cast<int32_t*>(a.key_lengths), dq, dk, dv};
  if (e->bwd_kind == sdpa::GraphKind::kComposite) {
    const sdpa::Dims d{s.batch, s.heads, s.seq, s.head_dim, s.ld};
    const size_t sum_bytes = (size_t(sdpa::softmax_sum_bytes(d)) + 255) / 256 * 256;
    const size_t acc_bytes = size_t(sdpa::dq_accum_bytes(d));
    m.spill.reserve(sum_bytes + acc_bytes);
    char* base = static_cast<char*>(m.spill.get());
    CUDA_CHECK(cudaMemsetAsync(base + sum_bytes, 0, acc_bytes, stream_));  // dQ accumulates into it
    uids.insert(uids.end(), {sdpa::kSoftmaxSum, sdpa::kDQAccum, sdpa::kDropScaleInv, sdpa::kNegInf});
    ptrs.insert(ptrs.end(), {base, base + sum_bytes, &keep_rate, &fill});
  }
  if (dropout) {  // the forward's mask again, from the same key
    uids.insert(uids.end(), {sdpa::kDropMask, sdpa::kDropScale});
    ptrs.insert(ptrs.end(), {m.dropout_mask(s, a.dropout, a.dropout_key, stream_), &keep_scale});
  }
  const std::string err = dnn::execute(m.handle, e->bwd, uids, ptrs, m.cudnn_workspace(e->bwd.workspace));
  if (!err.empty()) {
    e->why = "cuDNN backward failed for " + shape_text(s) + ": " + err;
    fall_back(e->why);
    return false;
  }
  rows_to_f32(dq, a.d_q, s.qkv_stride(), rows, s.ld, stream_);
  rows_to_f32(dk, a.d_k, s.qkv_stride(), rows, s.ld, stream_);
  rows_to_f32(dv, a.d_v, s.qkv_stride(), rows, s.ld, stream_);
  return true;
}

bool FusedAttention::needs_forward_check(const AttentionShape& s, bool dropout) const {
  auto it = impl_->entries.find(Impl::key(s, dropout));
  return mode_ == AttentionMode::kAuto && it != impl_->entries.end() && !it->second.fwd_checked;
}

bool FusedAttention::needs_backward_check(const AttentionShape& s, bool dropout) const {
  auto it = impl_->entries.find(Impl::key(s, dropout));
  return mode_ == AttentionMode::kAuto && it != impl_->entries.end() && !it->second.bwd_checked;
}

void FusedAttention::record_check(const AttentionShape& s, bool dropout, bool backward, double rel) {
  const double bound = backward ? kFusedBackwardTolerance : kFusedForwardTolerance;
  const char* what = backward ? "backward" : "forward";
  const std::string shape = shape_text(s) + (dropout ? " with dropout" : "");
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.3e (bound %.0e)", rel, bound);
  if (rel <= bound) {  // false for NaN
    auto& e = impl_->entries[Impl::key(s, dropout)];
    (backward ? e.bwd_checked : e.fwd_checked) = true;
    impl_->log_once(std::string("auto: cuDNN ") + what + " for " + shape +
                    " matches the hand-written one: max rel error " + buf);
    return;
  }
  impl_->disabled = std::string("auto: cuDNN ") + what + " for " + shape +
                    " differs from the hand-written one: max rel error " + buf + "; fused attention switched off";
  impl_->log_once(impl_->disabled);
}

#else  // !LANSBERT_HAVE_CUDNN

struct FusedAttention::Impl {
  DeviceBytes diff;
};

FusedAttention::FusedAttention(AttentionMode mode, cudaStream_t stream)
    : mode_(mode), stream_(stream), impl_(std::make_unique<Impl>()) {}
FusedAttention::~FusedAttention() = default;
std::string FusedAttention::availability() {
  return "unavailable: built without cuDNN headers (cudnn_graph.h not found at configure time)";
}
void FusedAttention::fall_back(const std::string& reason) {
  if (last_fallback_ != reason) log_line("precision.attention " + std::string(attention_mode_name(mode_)) +
                                         ": hand-written attention (" + reason + ")");
  last_fallback_ = reason;
}
bool FusedAttention::forward(const AttentionForward<float>& a) {
  std::string why = fused_attention_argument_check(a.shape, a.dropout, a.key_lengths != nullptr);
  fall_back(why.empty() ? "built without cuDNN headers" : why);
  return false;
}
bool FusedAttention::backward(const AttentionBackward<float>&) { return false; }
bool FusedAttention::needs_forward_check(const AttentionShape&, bool) const { return false; }
bool FusedAttention::needs_backward_check(const AttentionShape&, bool) const { return false; }
void FusedAttention::record_check(const AttentionShape&, bool, bool, double) {}

#endif  // LANSBERT_HAVE_CUDNN

FusedAttention::Diff FusedAttention::compare(const float* a, const float* b, size_t n) {
  impl_->diff.reserve(2 * sizeof(unsigned));
  unsigned* out = static_cast<unsigned*>(impl_->diff.get());
  CUDA_CHECK(cudaMemsetAsync(out, 0, 2 * sizeof(unsigned), stream_));
  if (n) {
    diff_kernel<<<grid_for(n), kThreads, 0, stream_>>>(a, b, n, out);
    LB_LAUNCH_CHECK();
  }
  unsigned host[2];
  CUDA_CHECK(cudaMemcpyAsync(host, out, sizeof host, cudaMemcpyDeviceToHost, stream_));
  CUDA_CHECK(cudaStreamSynchronize(stream_));
  float f[2];
  std::memcpy(f, host, sizeof f);
  return {f[0], f[1]};
}

}  // namespace lansbert::cuda
