// The flash attention's kernels (flash_attention.h). Four warps per block, each owning 16 rows
// of a 64-row tile; tiles of 32 along the other dimension. Products go through WMMA 16x16x16
// fragments with 16-bit operands and fp32 accumulation; whatever is per element (the online
// softmax, dropout, d(scores)) goes through shared memory as fp32 and the bodies of
// kernels/flash_attention.h, which the CPU twin calls too.
//
//   forward      grid (B*A x query tiles of 64): ctx and lse, key tiles of 32 in order
//   row_d        D = d(ctx) . ctx per query row (from fp32 values)
//   dk_dv        grid (B*A x key tiles of 64): d_k, d_v, query tiles of 32 in order
//   dq           grid (B*A x query tiles of 64): d_q, key tiles of 32 in order
//
// Each kernel recomputes the scores it needs from q and k (the backward's two kernels both
// do), which costs two GEMM-sized products more than a kernel accumulating d_q with atomics,
// but keeps the result independent of scheduling.
#include <mma.h>

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include "flash_attention.h"
#include "lansbert/kernels/flash_attention.h"
#include "lansbert/kernels/half.h"
#include "launch.cuh"

namespace lansbert::cuda {

namespace {

using namespace nvcuda;
using kern::HalfFormat;

constexpr int kD = kern::kFlashHeadDim;
constexpr int kRows = kern::kFlashRowTile;  // rows per block, 16 per warp
constexpr int kCols = kern::kFlashKeyTile;  // the tile walked inside a block
constexpr int kWarps = kRows / 16;
constexpr int kBlock = kWarps * 32;
constexpr unsigned kFull = 0xffffffffu;
static_assert(kD % 16 == 0 && kCols % 16 == 0 && kCols == 32, "lanes map to tile columns");

template <HalfFormat F>
struct Elem;
template <>
struct Elem<HalfFormat::kBf16> {
  using type = __nv_bfloat16;
};
template <>
struct Elem<HalfFormat::kFp16> {
  using type = __half;
};

template <HalfFormat F, typename Layout>
using FragA = wmma::fragment<wmma::matrix_a, 16, 16, 16, typename Elem<F>::type, Layout>;
template <HalfFormat F, typename Layout>
using FragB = wmma::fragment<wmma::matrix_b, 16, 16, 16, typename Elem<F>::type, Layout>;
using Acc = wmma::fragment<wmma::accumulator, 16, 16, 16, float>;

template <HalfFormat F>
__device__ const typename Elem<F>::type* as_elem(const uint16_t* p) {
  return reinterpret_cast<const typename Elem<F>::type*>(p);
}

struct Layout {
  int batch, heads, seq, qkv_ld, ld;
  float scale, dropout;
  RngKey key;
};

// The tile of kRows rows a block owns: the grid is one-dimensional, tiles of one (sequence,
// head) pair consecutive (their K/V rows are reused through L2), then the heads, then the
// sequences. In gridDim.x, whose limit is 2^31 - 1: gridDim.y held sequences times heads once
// and stopped at 65,535 (4,096 sequences of 16 heads).
struct BlockTile {
  int b, h, bh, row0;
};
__device__ inline int tiles_per_head(const Layout& L) { return (L.seq + kRows - 1) / kRows; }
__device__ inline BlockTile block_tile(const Layout& L) {
  const int tiles = tiles_per_head(L);
  const int bh = int(blockIdx.x / unsigned(tiles)), tile = int(blockIdx.x % unsigned(tiles));
  return {bh / L.heads, bh % L.heads, bh, tile * kRows};
}

// An input element as the GEMMs' 16-bit operand: fp32 rounded, or a kept 16-bit copy's bits.
template <HalfFormat F>
__device__ uint16_t operand_bits(float x) {
  return kern::float_to_half(x, F);
}
template <HalfFormat F>
__device__ uint16_t operand_bits(uint16_t x) {
  return x;
}
template <HalfFormat F>
__device__ float value_of(float x) {
  return x;
}
template <HalfFormat F>
__device__ float value_of(uint16_t x) {
  return kern::half_to_float(x, F);
}
// An output element: fp32, or rounded into a kept 16-bit copy.
template <HalfFormat F>
__device__ void put(float* p, float v) {
  *p = v;
}
template <HalfFormat F>
__device__ void put(uint16_t* p, float v) {
  *p = kern::float_to_half(v, F);
}

// rows [r0, r0 + n) of head h of sequence b from a [B*S, ld] tensor (fp32, or a 16-bit copy)
// into dst[n][kD] as 16-bit bits; rows past the sequence are zeros. All threads take part.
template <HalfFormat F, typename In>
__device__ void stage_rows(const In* x, int ld, const Layout& L, int b, int h, int r0, int n, uint16_t* dst) {
  for (int i = threadIdx.x; i < n * kD; i += kBlock) {
    const int r = r0 + i / kD;
    dst[i] = r < L.seq ? operand_bits<F>(x[(int64_t(b) * L.seq + r) * ld + int64_t(h) * kD + i % kD]) : uint16_t(0);
  }
}
// kern::mask_span of positions [p0, p0 + n) of sequence b (those inside it), n <= kRows: each
// lane of a warp reads up to two of them and the warp merges its lanes' spans, so every thread
// of every warp ends with the same span and a tile skipped by kern::span_may_see is skipped by
// the whole block (before its __syncthreads). A skipped tile's probabilities are all zero: it
// would add nothing. One load per lane instead of n per thread, before each tile's staging.
__device__ kern::MaskSpan block_span(const int32_t* mask, const Layout& L, int b, int p0, int n) {
  const int lane = threadIdx.x % 32, end = min(n, L.seq - p0);
  kern::MaskSpan s;
  for (int i = lane; i < end; i += 32) kern::span_add(s, mask[int64_t(b) * L.seq + p0 + i]);
  for (int offset = 16; offset > 0; offset /= 2) {
    kern::MaskSpan other;
    other.lo = __shfl_xor_sync(kFull, s.lo, offset);
    other.hi = __shfl_xor_sync(kFull, s.hi, offset);
    other.has_zero = __shfl_xor_sync(kFull, int(s.has_zero), offset) != 0;
    s = kern::span_merge(s, other);
  }
  return s;
}
// The inverse for fp32 results: src[n][kD] (one warp's 16 rows) to rows r0.. of dst, fp32 or
// rounded into a kept 16-bit copy.
template <HalfFormat F, typename Out>
__device__ void write_rows(const float* src, Out* x, int ld, const Layout& L, int b, int h, int r0, float mul) {
  const int lane = threadIdx.x % 32;
  for (int i = lane; i < 16 * kD; i += 32) {
    const int r = r0 + i / kD;
    if (r < L.seq) put<F>(x + (int64_t(b) * L.seq + r) * ld + int64_t(h) * kD + i % kD, src[i] * mul);
  }
}
// A warp's 16 x kD rows of `src` (ld kD) as kD/16 matrix_a fragments.
template <HalfFormat F>
__device__ void load_a(FragA<F, wmma::row_major> (&f)[kD / 16], const uint16_t* src) {
  for (int kk = 0; kk < kD / 16; ++kk) wmma::load_matrix_sync(f[kk], as_elem<F>(src + kk * 16), kD);
}
// out[16][kCols] (fp32, ld kCols) = a (16 x kD) times the transpose of rows[kCols][kD].
template <HalfFormat F>
__device__ void times_rows_transposed(const FragA<F, wmma::row_major> (&a)[kD / 16], const uint16_t* rows,
                                      float* out) {
  for (int n = 0; n < kCols / 16; ++n) {
    Acc acc;
    wmma::fill_fragment(acc, 0.f);
    for (int kk = 0; kk < kD / 16; ++kk) {
      FragB<F, wmma::col_major> bt;
      wmma::load_matrix_sync(bt, as_elem<F>(rows + n * 16 * kD + kk * 16), kD);
      wmma::mma_sync(acc, a[kk], bt, acc);
    }
    wmma::store_matrix_sync(out + n * 16, acc, kCols, wmma::mem_row_major);
  }
}
// acc[n] += p (16 x kCols, 16-bit, ld kCols) times rows[kCols][kD].
template <HalfFormat F>
__device__ void accumulate_product(Acc (&acc)[kD / 16], const uint16_t* p, const uint16_t* rows) {
  for (int kk = 0; kk < kCols / 16; ++kk) {
    FragA<F, wmma::row_major> pa;
    wmma::load_matrix_sync(pa, as_elem<F>(p + kk * 16), kCols);
    for (int n = 0; n < kD / 16; ++n) {
      FragB<F, wmma::row_major> vb;
      wmma::load_matrix_sync(vb, as_elem<F>(rows + kk * 16 * kD + n * 16), kD);
      wmma::mma_sync(acc[n], pa, vb, acc[n]);
    }
  }
}

// The bf16 fragments exist from sm_80; a bf16 launch is refused below that on the host.
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ < 800
#define LB_FLASH_SKIP(F) if constexpr (F == HalfFormat::kBf16) return; else
#else
#define LB_FLASH_SKIP(F)
#endif

template <HalfFormat F, typename In, typename Out>
__device__ void forward_body(Layout L, const In* q, const In* k, const In* v, const int32_t* mask, Out* ctx,
                             float* lse) {
  __shared__ __align__(32) uint16_t q_s[kRows * kD];
  __shared__ __align__(32) uint16_t k_s[kCols * kD];
  __shared__ __align__(32) uint16_t v_s[kCols * kD];
  __shared__ __align__(32) float s_s[kWarps][16 * kCols];
  __shared__ __align__(32) uint16_t p_s[kWarps][16 * kCols];
  __shared__ __align__(32) float o_s[kWarps][16 * kD];
  __shared__ int mask_s[kCols];
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const BlockTile bt = block_tile(L);
  const int b = bt.b, h = bt.h, bh = bt.bh, q0 = bt.row0;
  stage_rows<F>(q, L.qkv_ld, L, b, h, q0, kRows, q_s);
  for (int i = lane; i < 16 * kD; i += 32) o_s[warp][i] = 0.f;
  __syncthreads();
  FragA<F, wmma::row_major> qa[kD / 16];
  load_a<F>(qa, q_s + warp * 16 * kD);
  // Lane pair (2r, 2r+1) owns row r of the warp's 16: keys [16 half, 16 half + 16) of a tile,
  // and columns [32 half, 32 half + 32) of the output.
  const int r = lane / 2, half = lane % 2, row = q0 + warp * 16 + r;
  // The row's own mask value (kern::attention_visible); rows past the sequence are not written.
  const int32_t query = row < L.seq ? mask[b * L.seq + row] : 0;
  const kern::MaskSpan queries = block_span(mask, L, b, q0, kRows);
  float m = -kern::flash_infinity<float>(), l = 0.f;
  kern::DropoutBits bits(L.key);
  for (int k0 = 0; k0 < L.seq; k0 += kCols) {
    if (!kern::span_may_see(block_span(mask, L, b, k0, kCols), queries)) continue;  // unseen: adds nothing
    __syncthreads();  // the previous tile's k_s, v_s, mask_s are no longer read
    stage_rows<F>(k, L.qkv_ld, L, b, h, k0, kCols, k_s);
    stage_rows<F>(v, L.qkv_ld, L, b, h, k0, kCols, v_s);
    if (threadIdx.x < kCols) mask_s[threadIdx.x] = k0 + int(threadIdx.x) < L.seq ? mask[b * L.seq + k0 + threadIdx.x] : 0;
    __syncthreads();
    times_rows_transposed<F>(qa, k_s, s_s[warp]);
    __syncwarp();
    const float* srow = s_s[warp] + r * kCols;
    float tile_max = -kern::flash_infinity<float>();
    for (int c = 16 * half; c < 16 * half + 16; ++c)
      if (kern::attention_visible(mask_s[c], query)) tile_max = fmaxf(tile_max, L.scale * srow[c]);
    tile_max = fmaxf(tile_max, __shfl_xor_sync(kFull, tile_max, 1));
    const float m_new = kern::flash_new_max(m, tile_max), alpha = kern::flash_rescale(m, m_new);
    float sum = 0.f;
    for (int c = 16 * half; c < 16 * half + 16; ++c) {
      const bool seen = kern::attention_visible(mask_s[c], query);
      const float p = kern::flash_exp(srow[c], seen, L.scale, m_new);
      sum += p;
      const uint32_t z = L.dropout > 0 && seen ? bits(kern::flash_prob_index(bh, L.seq, row, k0 + c)) : 0u;
      p_s[warp][r * kCols + c] = kern::float_to_half(kern::flash_dropped(p, z, L.dropout), F);
    }
    sum += __shfl_xor_sync(kFull, sum, 1);
    l = l * alpha + sum;
    m = m_new;
    for (int d = 32 * half; d < 32 * half + 32; ++d) o_s[warp][r * kD + d] *= alpha;
    __syncwarp();
    Acc acc[kD / 16];
    for (int n = 0; n < kD / 16; ++n) wmma::load_matrix_sync(acc[n], o_s[warp] + n * 16, kD, wmma::mem_row_major);
    accumulate_product<F>(acc, p_s[warp], v_s);
    for (int n = 0; n < kD / 16; ++n) wmma::store_matrix_sync(o_s[warp] + n * 16, acc[n], kD, wmma::mem_row_major);
    __syncwarp();
  }
  // ctx = acc / l, one row per lane pair; lse by the pair's first lane.
  const float inv = kern::flash_inv_sum(l);
  if (row < L.seq) {
    for (int d = 32 * half; d < 32 * half + 32; ++d)
      put<F>(ctx + (int64_t(b) * L.seq + row) * L.ld + int64_t(h) * kD + d, o_s[warp][r * kD + d] * inv);
    if (half == 0) lse[int64_t(bh) * L.seq + row] = kern::flash_lse(m, l);
  }
}

template <HalfFormat F, typename In, typename Out>
__global__ void __launch_bounds__(kBlock) flash_forward_kernel(Layout L, const In* q, const In* k, const In* v,
                                                               const int32_t* mask, Out* ctx, float* lse) {
  LB_FLASH_SKIP(F) forward_body<F>(L, q, k, v, mask, ctx, lse);
}

// D per (sequence, head, query) row, in a fixed order (one thread per row).
template <HalfFormat F, typename In>
__global__ void flash_row_d_kernel(Layout L, const In* d_ctx, const In* ctx, float* row_d) {
  const int64_t rows = int64_t(L.batch) * L.heads * L.seq;
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < rows; i += int64_t(gridDim.x) * blockDim.x) {
    const int64_t bh = i / L.seq, b = bh / L.heads;
    const int h = int(bh % L.heads), s = int(i % L.seq);
    const int64_t at = (b * L.seq + s) * L.ld + int64_t(h) * kD;
    float sum = 0.f;
    for (int d = 0; d < kD; ++d) sum += value_of<F>(d_ctx[at + d]) * value_of<F>(ctx[at + d]);
    row_d[i] = sum;
  }
}

// In: what q, k, v, d(ctx) are read from; Out: what d_q, d_k, d_v are written to (fp32, or
// their kept 16-bit copies).
template <typename In, typename Out = float>
struct BackwardArgs {
  Layout L;
  const In *q, *k, *v, *d_ctx;
  const float *lse, *row_d;
  const int32_t* mask;
  Out *d_q, *d_k, *d_v;
  // Null, or [B * tiles][3 * ld]: each block's column sums of the d(q, k, v) rows it wrote, as
  // written (16-bit), for column_finish_kernel (AttentionBackward::d_qkv_bias).
  float* bias_part = nullptr;
};

// The block's kRows result rows (`rows`, ld kD, rows past the sequence left out): column t
// rounded as its 16-bit copy holds it, added in row order, into this block's slot of the
// bias sums' partials (`which`: 0 for d_q, 1 d_k, 2 d_v). Threads t < kD; the CPU twin adds
// in the same order (cpu_flash_attention.cc).
template <HalfFormat F, typename In, typename Out>
__device__ void add_bias_partial(const BackwardArgs<In, Out>& a, const float* rows, int b, int h, int r0,
                                 int which) {
  const Layout& L = a.L;
  const int t = threadIdx.x;
  if (t >= kD) return;
  float s = 0.f;
  for (int r = 0; r < kRows && r0 + r < L.seq; ++r) s += kern::round_to_half(rows[r * kD + t], F);
  const int64_t split = int64_t(b) * tiles_per_head(L) + r0 / kRows;
  a.bias_part[(split * 3 + which) * L.ld + int64_t(h) * kD + t] = s;
}

// d_k and d_v for a block of kRows keys; warp w owns keys j0 + 16 w .. + 16, lane c the query
// c of each tile of kCols, walking the warp's 16 keys (consecutive dropout counters).
template <HalfFormat F, typename In, typename Out>
__device__ void dk_dv_body(const BackwardArgs<In, Out>& a) {
  const Layout& L = a.L;
  // Staging of the block's K and V rows, then (once they are in fragments) the warps' S^T and
  // d(pd)^T tiles, then the results.
  __shared__ __align__(32) unsigned char big[2 * kRows * kD * 2];
  __shared__ __align__(32) uint16_t q_s[kCols * kD];
  __shared__ __align__(32) uint16_t do_s[kCols * kD];
  __shared__ __align__(32) uint16_t pt_s[kWarps][16 * kCols];
  __shared__ __align__(32) uint16_t dst_s[kWarps][16 * kCols];
  __shared__ float lse_s[kCols];
  __shared__ float d_s[kCols];
  __shared__ int querymask_s[kCols];
  __shared__ int keymask_s[kRows];
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const BlockTile bt = block_tile(L);
  const int b = bt.b, h = bt.h, bh = bt.bh, j0 = bt.row0;
  uint16_t* k_stage = reinterpret_cast<uint16_t*>(big);
  uint16_t* v_stage = k_stage + kRows * kD;
  stage_rows<F>(a.k, L.qkv_ld, L, b, h, j0, kRows, k_stage);
  stage_rows<F>(a.v, L.qkv_ld, L, b, h, j0, kRows, v_stage);
  if (threadIdx.x < kRows) keymask_s[threadIdx.x] = j0 + int(threadIdx.x) < L.seq ? a.mask[b * L.seq + j0 + threadIdx.x] : 0;
  __syncthreads();
  FragA<F, wmma::row_major> ka[kD / 16], va[kD / 16];
  load_a<F>(ka, k_stage + warp * 16 * kD);
  load_a<F>(va, v_stage + warp * 16 * kD);
  __syncthreads();  // `big` is reused below
  float* st = reinterpret_cast<float*>(big) + warp * 2 * 16 * kCols;
  float* dpt = st + 16 * kCols;
  Acc dk[kD / 16], dv[kD / 16];
  for (int n = 0; n < kD / 16; ++n) {
    wmma::fill_fragment(dk[n], 0.f);
    wmma::fill_fragment(dv[n], 0.f);
  }
  const kern::MaskSpan keys = block_span(a.mask, L, b, j0, kRows);
  kern::DropoutBits bits(L.key);
  for (int i0 = 0; i0 < L.seq; i0 += kCols) {
    if (!kern::span_may_see(keys, block_span(a.mask, L, b, i0, kCols))) continue;  // unseen: p = ds = 0
    __syncthreads();
    stage_rows<F>(a.q, L.qkv_ld, L, b, h, i0, kCols, q_s);
    stage_rows<F>(a.d_ctx, L.ld, L, b, h, i0, kCols, do_s);
    if (threadIdx.x < kCols) {
      const int i = i0 + threadIdx.x;
      lse_s[threadIdx.x] = i < L.seq ? a.lse[int64_t(bh) * L.seq + i] : kern::flash_infinity<float>();
      d_s[threadIdx.x] = i < L.seq ? a.row_d[int64_t(bh) * L.seq + i] : 0.f;
      querymask_s[threadIdx.x] = i < L.seq ? a.mask[b * L.seq + i] : 0;
    }
    __syncthreads();
    times_rows_transposed<F>(ka, q_s, st);   // S^T: the warp's keys x the tile's queries
    times_rows_transposed<F>(va, do_s, dpt); // d(pd)^T
    __syncwarp();
    const int query = i0 + lane;
    for (int r = 0; r < 16; ++r) {
      const int key = j0 + warp * 16 + r;
      const bool unmasked = kern::attention_visible(keymask_s[warp * 16 + r], querymask_s[lane]);
      const float p = kern::flash_prob(st[r * kCols + lane], unmasked, L.scale, lse_s[lane]);
      const uint32_t z = L.dropout > 0 && p != 0.f ? bits(kern::flash_prob_index(bh, L.seq, query, key)) : 0u;
      pt_s[warp][r * kCols + lane] = kern::float_to_half(kern::flash_dropped(p, z, L.dropout), F);
      dst_s[warp][r * kCols + lane] =
          kern::float_to_half(kern::flash_dscore(p, dpt[r * kCols + lane], z, L.dropout, d_s[lane], L.scale), F);
    }
    __syncwarp();
    accumulate_product<F>(dv, pt_s[warp], do_s);
    accumulate_product<F>(dk, dst_s[warp], q_s);
  }
  __syncthreads();
  float* out = reinterpret_cast<float*>(big) + warp * 16 * kD;
  // Called once per result with a fixed array: choosing dk or dv by a loop counter made the
  // bf16 instances keep both in a 256-byte stack frame (ptxas -v, sm_90).
  auto finish = [&](const Acc (&acc)[kD / 16], Out* dst, int which) {
    for (int n = 0; n < kD / 16; ++n) wmma::store_matrix_sync(out + n * 16, acc[n], kD, wmma::mem_row_major);
    __syncwarp();
    write_rows<F>(out, dst, L.qkv_ld, L, b, h, j0 + warp * 16, 1.f);
    __syncwarp();
    if (a.bias_part) {  // the same for every thread
      __syncthreads();  // all four warps' rows are in `big`
      add_bias_partial<F>(a, reinterpret_cast<const float*>(big), b, h, j0, which);
      __syncthreads();  // before the next result overwrites them
    }
  };
  finish(dk, a.d_k, 1);
  finish(dv, a.d_v, 2);
}

template <HalfFormat F, typename In, typename Out>
__global__ void __launch_bounds__(kBlock) flash_dk_dv_kernel(BackwardArgs<In, Out> a) {
  LB_FLASH_SKIP(F) dk_dv_body<F>(a);
}

// d_q for a block of kRows queries; warp w owns queries i0 + 16 w .. + 16, a lane pair one
// query and half of each key tile (as in the forward).
template <HalfFormat F, typename In, typename Out>
__device__ void dq_body(const BackwardArgs<In, Out>& a) {
  const Layout& L = a.L;
  __shared__ __align__(32) unsigned char big[2 * kRows * kD * 2];
  __shared__ __align__(32) uint16_t k_s[kCols * kD];
  __shared__ __align__(32) uint16_t v_s[kCols * kD];
  __shared__ __align__(32) uint16_t ds_s[kWarps][16 * kCols];
  __shared__ int mask_s[kCols];
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const BlockTile bt = block_tile(L);
  const int b = bt.b, h = bt.h, bh = bt.bh, i0 = bt.row0;
  uint16_t* q_stage = reinterpret_cast<uint16_t*>(big);
  uint16_t* do_stage = q_stage + kRows * kD;
  stage_rows<F>(a.q, L.qkv_ld, L, b, h, i0, kRows, q_stage);
  stage_rows<F>(a.d_ctx, L.ld, L, b, h, i0, kRows, do_stage);
  __syncthreads();
  FragA<F, wmma::row_major> qa[kD / 16], doa[kD / 16];
  load_a<F>(qa, q_stage + warp * 16 * kD);
  load_a<F>(doa, do_stage + warp * 16 * kD);
  __syncthreads();
  float* s = reinterpret_cast<float*>(big) + warp * 2 * 16 * kCols;
  float* dpd = s + 16 * kCols;
  const int r = lane / 2, half = lane % 2, row = i0 + warp * 16 + r;
  const float lse = row < L.seq ? a.lse[int64_t(bh) * L.seq + row] : kern::flash_infinity<float>();
  const float row_d = row < L.seq ? a.row_d[int64_t(bh) * L.seq + row] : 0.f;
  const int32_t query = row < L.seq ? a.mask[b * L.seq + row] : 0;  // kern::attention_visible
  const kern::MaskSpan queries = block_span(a.mask, L, b, i0, kRows);
  Acc dq[kD / 16];
  for (int n = 0; n < kD / 16; ++n) wmma::fill_fragment(dq[n], 0.f);
  kern::DropoutBits bits(L.key);
  for (int k0 = 0; k0 < L.seq; k0 += kCols) {
    if (!kern::span_may_see(block_span(a.mask, L, b, k0, kCols), queries)) continue;  // unseen: ds = 0
    __syncthreads();
    stage_rows<F>(a.k, L.qkv_ld, L, b, h, k0, kCols, k_s);
    stage_rows<F>(a.v, L.qkv_ld, L, b, h, k0, kCols, v_s);
    if (threadIdx.x < kCols) mask_s[threadIdx.x] = k0 + int(threadIdx.x) < L.seq ? a.mask[b * L.seq + k0 + threadIdx.x] : 0;
    __syncthreads();
    times_rows_transposed<F>(qa, k_s, s);
    times_rows_transposed<F>(doa, v_s, dpd);
    __syncwarp();
    for (int c = 16 * half; c < 16 * half + 16; ++c) {
      const float p = kern::flash_prob(s[r * kCols + c], kern::attention_visible(mask_s[c], query), L.scale, lse);
      const uint32_t z = L.dropout > 0 && p != 0.f ? bits(kern::flash_prob_index(bh, L.seq, row, k0 + c)) : 0u;
      ds_s[warp][r * kCols + c] =
          kern::float_to_half(kern::flash_dscore(p, dpd[r * kCols + c], z, L.dropout, row_d, L.scale), F);
    }
    __syncwarp();
    accumulate_product<F>(dq, ds_s[warp], k_s);
  }
  __syncthreads();
  float* out = reinterpret_cast<float*>(big) + warp * 16 * kD;
  for (int n = 0; n < kD / 16; ++n) wmma::store_matrix_sync(out + n * 16, dq[n], kD, wmma::mem_row_major);
  __syncwarp();
  write_rows<F>(out, a.d_q, L.qkv_ld, L, b, h, i0 + warp * 16, 1.f);
  if (a.bias_part) {
    __syncthreads();
    add_bias_partial<F>(a, reinterpret_cast<const float*>(big), b, h, i0, 0);
  }
}

template <HalfFormat F, typename In, typename Out>
__global__ void __launch_bounds__(kBlock) flash_dq_kernel(BackwardArgs<In, Out> a) {
  LB_FLASH_SKIP(F) dq_body<F>(a);
}

template <typename A>
Layout layout_of(const A& a) {
  const AttentionShape& s = a.shape;
  return Layout{s.batch, s.heads, s.seq, s.qkv_stride(), s.ld, a.scale, a.dropout, a.dropout_key};
}
int tiles_per_sequence(const AttentionShape& s) { return (s.seq + kRows - 1) / kRows; }

// BlockTile's grid: every tile of every (sequence, head) pair along x.
dim3 tiles_of(const AttentionShape& s) {
  const int64_t blocks = int64_t(tiles_per_sequence(s)) * s.heads * s.batch;
  LB_CHECK_MSG(blocks <= INT32_MAX, "flash attention: more tiles than a grid holds");
  return dim3(unsigned(blocks));
}

}  // namespace

std::string flash_attention_check(const AttentionShape& s, GemmMath math, int cc) {
  if (!is_half_gemm(math))
    return std::string("the flash attention runs on tensor cores with 16-bit GEMMs; GEMMs are ") + gemm_math_name(math);
  if (math == GemmMath::kBf16 && cc < 80) return "bf16 tensor-core fragments need sm_80 or newer";
  if (s.head_dim != kD)
    return "head_dim " + std::to_string(s.head_dim) + " (the flash kernels are built for " + std::to_string(kD) + ")";
  return "";
}

void flash_attention_forward(const AttentionForward<float>& a, HalfFormat format, const FlashHalfIO& io,
                             cudaStream_t stream) {
  const Layout L = layout_of(a);
  kern::with_half_format(format, [&](auto F) {
    constexpr HalfFormat kF = decltype(F)::value;
    const dim3 grid = tiles_of(a.shape);
    if (io.q && io.ctx_out)
      flash_forward_kernel<kF><<<grid, kBlock, 0, stream>>>(L, io.q, io.k, io.v, a.key_mask, io.ctx_out, a.stats_slot());
    else if (io.q)
      flash_forward_kernel<kF><<<grid, kBlock, 0, stream>>>(L, io.q, io.k, io.v, a.key_mask, a.ctx, a.stats_slot());
    else
      flash_forward_kernel<kF><<<grid, kBlock, 0, stream>>>(L, a.q, a.k, a.v, a.key_mask, a.ctx, a.stats_slot());
  });
  LB_LAUNCH_CHECK();
}

namespace {

template <HalfFormat F, typename In, typename Out>
void launch_backward(const BackwardArgs<In, Out>& args, const In* ctx, const AttentionShape& s, float* row_d,
                     float* d_qkv_bias, cudaStream_t stream) {
  const size_t rows = size_t(s.batch) * s.heads * s.seq;
  flash_row_d_kernel<F><<<grid_for(rows), kThreads, 0, stream>>>(args.L, args.d_ctx, ctx, row_d);
  LB_LAUNCH_CHECK();
  flash_dk_dv_kernel<F><<<tiles_of(s), kBlock, 0, stream>>>(args);
  LB_LAUNCH_CHECK();  // each launch its own check: a failed dk_dv is not reported as dq's
  flash_dq_kernel<F><<<tiles_of(s), kBlock, 0, stream>>>(args);
  LB_LAUNCH_CHECK();
  if (args.bias_part) {  // the blocks' partials added in (sequence, tile) order per column
    const int cols = 3 * s.ld, splits = s.batch * tiles_per_sequence(s);
    column_finish_kernel<1><<<(cols + kThreads - 1) / kThreads, kThreads, 0, stream>>>(cols, splits, args.bias_part,
                                                                                      d_qkv_bias, nullptr);
    LB_LAUNCH_CHECK();
  }
}

}  // namespace

size_t flash_bias_partials(const AttentionShape& s) { return size_t(s.batch) * tiles_per_sequence(s) * 3 * s.ld; }

void flash_attention_backward(const AttentionBackward<float>& a, HalfFormat format, const FlashHalfIO& io,
                              float* row_d, float* bias_part, cudaStream_t stream) {
  LB_CHECK_MSG(!bias_part || (io.d_q && a.d_qkv_bias), "flash attention backward: bias sums only of 16-bit d(q, k, v)");
  const Layout L = layout_of(a);
  kern::with_half_format(format, [&](auto F) {
    constexpr HalfFormat kF = decltype(F)::value;
    if (io.q && io.d_q)
      launch_backward<kF>(BackwardArgs<uint16_t, uint16_t>{L, io.q, io.k, io.v, io.d_ctx, a.stats_slot(), row_d,
                                                           a.key_mask, io.d_q, io.d_k, io.d_v, bias_part},
                          io.ctx_in, a.shape, row_d, a.d_qkv_bias, stream);
    else if (io.q)
      launch_backward<kF>(BackwardArgs<uint16_t>{L, io.q, io.k, io.v, io.d_ctx, a.stats_slot(), row_d, a.key_mask,
                                                 a.d_q, a.d_k, a.d_v},
                          io.ctx_in, a.shape, row_d, nullptr, stream);
    else
      launch_backward<kF>(BackwardArgs<float>{L, a.q, a.k, a.v, a.d_ctx, a.stats_slot(), row_d, a.key_mask, a.d_q,
                                              a.d_k, a.d_v},
                          a.ctx, a.shape, row_d, nullptr, stream);
  });
}

}  // namespace lansbert::cuda
