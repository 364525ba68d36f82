// The SDPA operation graphs (cudnn_sdpa_graphs.h). Facts about which spelling cuDNN's
// engines match (virtual tensor types, the K^T view, the reshape-as-transpose, the fp32 dQ
// accumulator and softmax-sum workspaces) come from cuDNN's documentation and cudnn_frontend's
// lowering of its SDPA nodes; nothing here has been executed on a GPU yet.
#include "cudnn_sdpa_graphs.h"

#if LANSBERT_HAVE_CUDNN

namespace lansbert::cuda::sdpa {

namespace {

using Tensor = cudnnBackendDescriptor_t;

// Shapes and strides of the views (see the header).
struct Layout {
  const Dims& d;
  dnn::Dims bhsd() const { return {d.b, d.h, d.s, d.d}; }
  dnn::Dims bshd_strides() const { return {d.s * d.ld, d.d, d.ld, 1}; }  // [B*S, ld] rows
  dnn::Dims bhds() const { return {d.b, d.h, d.d, d.s}; }                // K^T, V^T
  dnn::Dims bhds_strides() const { return {d.s * d.ld, d.d, 1, d.ld}; }
  dnn::Dims scores() const { return {d.b, d.h, d.s, d.s}; }
  dnn::Dims scores_strides() const { return {d.h * d.s * d.s, d.s * d.s, d.s, 1}; }
  dnn::Dims scores_t_strides() const { return {d.h * d.s * d.s, d.s * d.s, 1, d.s}; }  // transposed view
  dnn::Dims rows() const { return {d.b, d.h, d.s, 1}; }
  dnn::Dims rows_strides() const { return {d.h * d.s, d.s, 1, 1}; }
  dnn::Dims dense_bhsd_strides() const { return {d.h * d.s * d.d, d.s * d.d, d.d, 1}; }
  static dnn::Dims one() { return {1, 1, 1, 1}; }
  dnn::Dims per_batch() const { return {d.b, 1, 1, 1}; }
};

// Virtual tensors get ids from 100 up, in creation order.
struct Virtuals {
  dnn::GraphBuilder& g;
  int64_t next = 100;
  Tensor make(cudnnDataType_t type, const dnn::Dims& dims, const dnn::Dims& strides) {
    return g.tensor(next++, type, dims, strides, /*is_virtual=*/true);
  }
};

// Where row >= len_q or col >= len_kv, `scores` becomes the -inf fill (cuDNN's padding mask
// as cudnn_frontend spells it: GEN_INDEX, CMP_LT, LOGICAL_AND, BINARY_SELECT).
Tensor pad_mask(dnn::GraphBuilder& g, Virtuals& v, const Layout& l, Tensor scores, Tensor len_q, Tensor len_kv,
                Tensor fill) {
  Tensor row = v.make(CUDNN_DATA_INT32, l.scores(), l.scores_strides());
  Tensor col = v.make(CUDNN_DATA_INT32, l.scores(), l.scores_strides());
  g.pointwise(CUDNN_POINTWISE_GEN_INDEX, scores, nullptr, nullptr, row, CUDNN_DATA_INT32, 2);
  g.pointwise(CUDNN_POINTWISE_GEN_INDEX, scores, nullptr, nullptr, col, CUDNN_DATA_INT32, 3);
  Tensor row_ok = v.make(CUDNN_DATA_BOOLEAN, l.scores(), l.scores_strides());
  Tensor col_ok = v.make(CUDNN_DATA_BOOLEAN, l.scores(), l.scores_strides());
  g.pointwise(CUDNN_POINTWISE_CMP_LT, row, len_q, nullptr, row_ok, CUDNN_DATA_BOOLEAN);
  g.pointwise(CUDNN_POINTWISE_CMP_LT, col, len_kv, nullptr, col_ok, CUDNN_DATA_BOOLEAN);
  Tensor keep = v.make(CUDNN_DATA_BOOLEAN, l.scores(), l.scores_strides());
  g.pointwise(CUDNN_POINTWISE_LOGICAL_AND, row_ok, col_ok, nullptr, keep, CUDNN_DATA_BOOLEAN);
  Tensor out = v.make(CUDNN_DATA_FLOAT, l.scores(), l.scores_strides());
  g.pointwise(CUDNN_POINTWISE_BINARY_SELECT, scores, fill, keep, out);
  return out;
}

// The tensors every graph names (K and V are seen transposed by some, so each graph makes
// its own).
struct Common {
  Tensor q, o, stats, scale, len_q, len_kv;
};
Common common_tensors(dnn::GraphBuilder& g, const Layout& l) {
  Common c;
  c.q = g.tensor(kQ, CUDNN_DATA_BFLOAT16, l.bhsd(), l.bshd_strides());
  c.o = g.tensor(kO, CUDNN_DATA_BFLOAT16, l.bhsd(), l.bshd_strides());
  c.stats = g.tensor(kStats, CUDNN_DATA_FLOAT, l.rows(), l.rows_strides());
  c.scale = g.tensor(kScale, CUDNN_DATA_FLOAT, Layout::one(), Layout::one(), false, /*by_value=*/true);
  c.len_q = g.tensor(kSeqLenQ, CUDNN_DATA_INT32, l.per_batch(), Layout::one());
  c.len_kv = g.tensor(kSeqLenKV, CUDNN_DATA_INT32, l.per_batch(), Layout::one());
  return c;
}

// The dropout inputs: M and r (cudnn_sdpa_graphs.h).
struct Dropout {
  Tensor mask, scale;
};
Dropout dropout_tensors(dnn::GraphBuilder& g, const Layout& l) {
  return {g.tensor(kDropMask, CUDNN_DATA_BFLOAT16, l.scores(), l.scores_strides()),
          g.tensor(kDropScale, CUDNN_DATA_FLOAT, Layout::one(), Layout::one(), false, /*by_value=*/true)};
}

// x * a * b in that order (two pointwise MULs), the result typed `type`: how cudnn_frontend
// spells the dropout multiplies (their order differs between forward and backward).
Tensor mul2(dnn::GraphBuilder& g, Virtuals& v, const Layout& l, Tensor x, Tensor a, Tensor b, cudnnDataType_t type,
            const dnn::Dims& strides) {
  Tensor xa = v.make(CUDNN_DATA_FLOAT, l.scores(), l.scores_strides());
  g.pointwise(CUDNN_POINTWISE_MUL, x, a, nullptr, xa);
  Tensor y = v.make(type, l.scores(), strides);
  g.pointwise(CUDNN_POINTWISE_MUL, xa, b, nullptr, y);
  return y;
}

void composite_forward(dnn::GraphBuilder& g, const Layout& l, bool dropout) {
  Virtuals v{g};
  const Common c = common_tensors(g, l);
  Tensor kt = g.tensor(kK, CUDNN_DATA_BFLOAT16, l.bhds(), l.bhds_strides());
  Tensor vv = g.tensor(kV, CUDNN_DATA_BFLOAT16, l.bhsd(), l.bshd_strides());
  Tensor fill = g.tensor(kNegInf, CUDNN_DATA_FLOAT, Layout::one(), Layout::one(), false, true);
  const dnn::Dims S = l.scores(), Ss = l.scores_strides(), R = l.rows(), Rs = l.rows_strides();

  Tensor s1 = v.make(CUDNN_DATA_FLOAT, S, Ss);
  g.matmul(c.q, kt, s1, c.len_q, c.len_kv);
  Tensor s2 = v.make(CUDNN_DATA_FLOAT, S, Ss);
  g.pointwise(CUDNN_POINTWISE_MUL, s1, c.scale, nullptr, s2);
  Tensor s3 = pad_mask(g, v, l, s2, c.len_q, c.len_kv, fill);
  // Softmax with statistics: Stats = max + log(sum), P = exp(S - max) / sum.
  Tensor mx = v.make(CUDNN_DATA_FLOAT, R, Rs);
  g.reduction(CUDNN_REDUCE_TENSOR_MAX, s3, mx);
  Tensor centred = v.make(CUDNN_DATA_FLOAT, S, Ss);
  g.pointwise(CUDNN_POINTWISE_SUB, s3, mx, nullptr, centred);
  Tensor e = v.make(CUDNN_DATA_FLOAT, S, Ss);
  g.pointwise(CUDNN_POINTWISE_EXP, centred, nullptr, nullptr, e);
  Tensor sum = v.make(CUDNN_DATA_FLOAT, R, Rs);
  g.reduction(CUDNN_REDUCE_TENSOR_ADD, e, sum);
  Tensor log_sum = v.make(CUDNN_DATA_FLOAT, R, Rs);
  g.pointwise(CUDNN_POINTWISE_LOG, sum, nullptr, nullptr, log_sum);
  g.pointwise(CUDNN_POINTWISE_ADD, mx, log_sum, nullptr, c.stats);
  // The second GEMM reads P in the I/O type: P itself, or with dropout (P r) M.
  Tensor p = v.make(dropout ? CUDNN_DATA_FLOAT : CUDNN_DATA_BFLOAT16, S, Ss);
  g.pointwise(CUDNN_POINTWISE_DIV, e, sum, nullptr, p);
  if (dropout) {
    const Dropout dr = dropout_tensors(g, l);
    p = mul2(g, v, l, p, dr.scale, dr.mask, CUDNN_DATA_BFLOAT16, Ss);
  }
  g.matmul(p, vv, c.o, c.len_q, nullptr, c.len_kv);
}

void composite_backward(dnn::GraphBuilder& g, const Layout& l, bool dropout) {
  Virtuals v{g};
  const Common c = common_tensors(g, l);
  Tensor kt = g.tensor(kK, CUDNN_DATA_BFLOAT16, l.bhds(), l.bhds_strides());
  Tensor vt = g.tensor(kV, CUDNN_DATA_BFLOAT16, l.bhds(), l.bhds_strides());
  Tensor d_o = g.tensor(kDO, CUDNN_DATA_BFLOAT16, l.bhsd(), l.bshd_strides());
  Tensor dq = g.tensor(kDQ, CUDNN_DATA_BFLOAT16, l.bhsd(), l.bshd_strides());
  Tensor dk = g.tensor(kDK, CUDNN_DATA_BFLOAT16, l.bhsd(), l.bshd_strides());
  Tensor dv = g.tensor(kDV, CUDNN_DATA_BFLOAT16, l.bhsd(), l.bshd_strides());
  Tensor scale_inv = g.tensor(kDropScaleInv, CUDNN_DATA_FLOAT, Layout::one(), Layout::one(), false, true);
  Tensor fill = g.tensor(kNegInf, CUDNN_DATA_FLOAT, Layout::one(), Layout::one(), false, true);
  // The engines' spill buffers: dense fp32, in memory we provide.
  Tensor softmax_sum = g.tensor(kSoftmaxSum, CUDNN_DATA_FLOAT, l.rows(), l.rows_strides());
  Tensor dq_accum = g.tensor(kDQAccum, CUDNN_DATA_FLOAT, l.bhsd(), l.dense_bhsd_strides());
  const dnn::Dims S = l.scores(), Ss = l.scores_strides(), R = l.rows(), Rs = l.rows_strides();

  // softmax_sum = rowsum(dO * O) * (1 - p) (* 1 without dropout, as cudnn_frontend spells it).
  Tensor d_o_o = v.make(CUDNN_DATA_FLOAT, l.bhsd(), l.dense_bhsd_strides());
  g.pointwise(CUDNN_POINTWISE_MUL, d_o, c.o, nullptr, d_o_o);
  Tensor row_sum = v.make(CUDNN_DATA_FLOAT, R, Rs);
  g.reduction(CUDNN_REDUCE_TENSOR_ADD, d_o_o, row_sum);
  g.pointwise(CUDNN_POINTWISE_MUL, row_sum, scale_inv, nullptr, softmax_sum);

  // P = exp(Q K^T * scale - Stats), masked.
  Tensor s1 = v.make(CUDNN_DATA_FLOAT, S, Ss);
  g.matmul(c.q, kt, s1, c.len_q, c.len_kv);
  Tensor s2 = v.make(CUDNN_DATA_FLOAT, S, Ss);
  g.pointwise(CUDNN_POINTWISE_MUL, s1, c.scale, nullptr, s2);
  Tensor s3 = v.make(CUDNN_DATA_FLOAT, S, Ss);
  g.pointwise(CUDNN_POINTWISE_SUB, s2, c.stats, nullptr, s3);
  Tensor s4 = pad_mask(g, v, l, s3, c.len_q, c.len_kv, fill);
  Tensor p = v.make(CUDNN_DATA_FLOAT, S, Ss);
  g.pointwise(CUDNN_POINTWISE_EXP, s4, nullptr, nullptr, p);

  // dV = P^T dO, with dropout ((P M) r)^T dO (P^T: a reshape to the transposed strides, in
  // the I/O type).
  Dropout dr{};
  Tensor p_used = p;
  if (dropout) {
    dr = dropout_tensors(g, l);
    p_used = mul2(g, v, l, p, dr.mask, dr.scale, CUDNN_DATA_FLOAT, Ss);
  }
  Tensor p_t = v.make(CUDNN_DATA_BFLOAT16, S, l.scores_t_strides());
  g.reshape(p_used, p_t);
  g.matmul(p_t, d_o, dv, c.len_kv, nullptr, c.len_q);

  // dS = P * (dO V^T - softmax_sum) * scale; with dropout (P * ((dO V^T) M - softmax_sum)) r * scale.
  Tensor dp = v.make(CUDNN_DATA_FLOAT, S, Ss);
  g.matmul(d_o, vt, dp, c.len_q, c.len_kv);
  if (dropout) {
    Tensor dp_kept = v.make(CUDNN_DATA_FLOAT, S, Ss);
    g.pointwise(CUDNN_POINTWISE_MUL, dp, dr.mask, nullptr, dp_kept);
    dp = dp_kept;
  }
  Tensor dp_centred = v.make(CUDNN_DATA_FLOAT, S, Ss);
  g.pointwise(CUDNN_POINTWISE_SUB, dp, softmax_sum, nullptr, dp_centred);
  Tensor ds_unscaled = v.make(CUDNN_DATA_FLOAT, S, Ss);
  g.pointwise(CUDNN_POINTWISE_MUL, dp_centred, p, nullptr, ds_unscaled);
  if (dropout) {
    Tensor ds_dropped = v.make(CUDNN_DATA_FLOAT, S, Ss);
    g.pointwise(CUDNN_POINTWISE_MUL, ds_unscaled, dr.scale, nullptr, ds_dropped);
    ds_unscaled = ds_dropped;
  }
  Tensor ds = v.make(CUDNN_DATA_FLOAT, S, Ss);
  g.pointwise(CUDNN_POINTWISE_MUL, ds_unscaled, c.scale, nullptr, ds);

  // dK = dS^T Q.
  Tensor ds_t = v.make(CUDNN_DATA_BFLOAT16, S, l.scores_t_strides());
  g.reshape(ds, ds_t);
  g.matmul(ds_t, c.q, dk, c.len_kv, nullptr, c.len_q);

  // dQ = dS K, accumulated in fp32 and converted to the I/O type (K: K^T seen back as K).
  // The view is typed FLOAT, as cudnn_frontend leaves it (unset virtual tensors take the
  // graph's fp32 intermediate type); the engine reads K from memory in bf16 either way.
  Tensor k_view = v.make(CUDNN_DATA_FLOAT, l.bhsd(), l.bshd_strides());
  g.reshape(kt, k_view);
  g.matmul(ds, k_view, dq_accum, c.len_q, nullptr, c.len_kv);
  g.pointwise(CUDNN_POINTWISE_IDENTITY, dq_accum, nullptr, nullptr, dq);
}

#if CUDNN_VERSION >= 91700
void unified(dnn::GraphBuilder& g, const Layout& l, bool backward) {
  const Common c = common_tensors(g, l);
  Tensor k = g.tensor(kK, CUDNN_DATA_BFLOAT16, l.bhsd(), l.bshd_strides());  // K itself, not K^T
  Tensor vv = g.tensor(kV, CUDNN_DATA_BFLOAT16, l.bhsd(), l.bshd_strides());
  if (!backward) {
    g.operation(CUDNN_BACKEND_OPERATION_SDPA_FWD_DESCRIPTOR,
                {{CUDNN_ATTR_OPERATION_SDPA_FWD_QDESC, c.q},
                 {CUDNN_ATTR_OPERATION_SDPA_FWD_KDESC, k},
                 {CUDNN_ATTR_OPERATION_SDPA_FWD_VDESC, vv},
                 {CUDNN_ATTR_OPERATION_SDPA_FWD_ODESC, c.o},
                 {CUDNN_ATTR_OPERATION_SDPA_FWD_STATSDESC, c.stats},
                 {CUDNN_ATTR_OPERATION_SDPA_FWD_SCALEDESC, c.scale},
                 {CUDNN_ATTR_OPERATION_SDPA_FWD_SEQ_LEN_QDESC, c.len_q},
                 {CUDNN_ATTR_OPERATION_SDPA_FWD_SEQ_LEN_KVDESC, c.len_kv}},
                "SDPA forward");
    return;
  }
  Tensor d_o = g.tensor(kDO, CUDNN_DATA_BFLOAT16, l.bhsd(), l.bshd_strides());
  Tensor dq = g.tensor(kDQ, CUDNN_DATA_BFLOAT16, l.bhsd(), l.bshd_strides());
  Tensor dk = g.tensor(kDK, CUDNN_DATA_BFLOAT16, l.bhsd(), l.bshd_strides());
  Tensor dv = g.tensor(kDV, CUDNN_DATA_BFLOAT16, l.bhsd(), l.bshd_strides());
  g.operation(CUDNN_BACKEND_OPERATION_SDPA_BWD_DESCRIPTOR,
              {{CUDNN_ATTR_OPERATION_SDPA_BWD_QDESC, c.q},
               {CUDNN_ATTR_OPERATION_SDPA_BWD_KDESC, k},
               {CUDNN_ATTR_OPERATION_SDPA_BWD_VDESC, vv},
               {CUDNN_ATTR_OPERATION_SDPA_BWD_ODESC, c.o},
               {CUDNN_ATTR_OPERATION_SDPA_BWD_DODDESC, d_o},
               {CUDNN_ATTR_OPERATION_SDPA_BWD_STATSDESC, c.stats},
               {CUDNN_ATTR_OPERATION_SDPA_BWD_SCALEDESC, c.scale},
               {CUDNN_ATTR_OPERATION_SDPA_BWD_SEQ_LEN_QDESC, c.len_q},
               {CUDNN_ATTR_OPERATION_SDPA_BWD_SEQ_LEN_KVDESC, c.len_kv},
               {CUDNN_ATTR_OPERATION_SDPA_BWD_DQDESC, dq},
               {CUDNN_ATTR_OPERATION_SDPA_BWD_DKDESC, dk},
               {CUDNN_ATTR_OPERATION_SDPA_BWD_DVDESC, dv}},
              "SDPA backward");
}
#endif

}  // namespace

const char* name(GraphKind kind) {
  return kind == GraphKind::kUnified ? "unified SDPA node" : "composite flash-attention graph";
}

size_t min_version(GraphKind kind, bool backward) {
  if (kind == GraphKind::kComposite) return 91002;  // 9.10.0/9.10.1: known SDPA bugs (cudnn_frontend)
#if CUDNN_VERSION >= 91700
  return backward ? 91700 : 91500;  // the forward node takes sequence lengths from 9.15
#else
  return 0;
#endif
}

void add_forward(dnn::GraphBuilder& g, GraphKind kind, const Dims& d, bool dropout) {
  const Layout l{d};
  if (kind == GraphKind::kComposite) return composite_forward(g, l, dropout);
  if (dropout) return g.fail("the unified SDPA node takes no dropout mask (only cuDNN's own RNG)");
#if CUDNN_VERSION >= 91700
  unified(g, l, false);
#else
  g.fail("the unified SDPA node needs cuDNN >= 9.17 headers at build time");
#endif
}

void add_backward(dnn::GraphBuilder& g, GraphKind kind, const Dims& d, bool dropout) {
  const Layout l{d};
  if (kind == GraphKind::kComposite) return composite_backward(g, l, dropout);
  if (dropout) return g.fail("the unified SDPA node takes no dropout mask (only cuDNN's own RNG)");
#if CUDNN_VERSION >= 91700
  unified(g, l, true);
#else
  g.fail("the unified SDPA node needs cuDNN >= 9.17 headers at build time");
#endif
}

int64_t softmax_sum_bytes(const Dims& d) { return d.b * d.h * d.s * int64_t(sizeof(float)); }
int64_t dq_accum_bytes(const Dims& d) { return d.b * d.h * d.s * d.d * int64_t(sizeof(float)); }

}  // namespace lansbert::cuda::sdpa

#endif  // LANSBERT_HAVE_CUDNN
