// Row gathers on the GPU (embedding lookups, masked-position gathers) and their scatter-add
// gradients. The scatters must not depend on thread timing, so no float atomics: the indices
// are stably sorted with their positions (cub::DeviceRadixSort) and summed in the order of
// kernels/scatter_order.h, which the CPU twin (src/cpu/cpu_gather.cc) follows too, so the
// result is bit-identical to it:
//   pass 1, one block per chunk of kScatterPiece sorted entries: each piece (the part of a
//     row's run inside the chunk) is summed from zero in ascending order; a run that lies
//     inside the chunk is added to its row at once, a piece of a run that crosses a chunk
//     boundary is parked (the run's first piece in `tail` of its chunk, later ones in `head`);
//   pass 2, one block per chunk where a crossing run ends: its row plus its parked pieces,
//     in chunk order.
// A row hit by many entries (a token type: B*S/2 of them) is thus summed by many blocks with
// only n/kScatterPiece serial additions left, where one block used to add all of its rows.
#include <cub/device/device_radix_sort.cuh>

#include "cuda_ops.cuh"
#include "lansbert/kernels/scatter_order.h"
#include "launch.cuh"

namespace lansbert::cuda {

namespace {

constexpr int kPiece = kern::kScatterPiece;
constexpr int kScatterThreads = 256;  // columns of a row per block (bert-large: 4 per thread)

__global__ void iota_kernel(int32_t* v, int n) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) v[i] = i;
}

// Block c: the pieces of chunk [c*kPiece, min(n, (c+1)*kPiece)) of the sorted entries.
__global__ void scatter_pieces_kernel(const int32_t* keys, const int32_t* pos, const float* src,
                                      float* dst, float* head, float* tail, int n, int dim) {
  const int c = blockIdx.x, b0 = c * kPiece, b1 = kern::scatter_piece_end(b0, n);
  for (int s = b0; s < b1;) {
    const int32_t key = keys[s];
    int e = s + 1;
    while (e < b1 && keys[e] == key) ++e;
    const bool begun_before = s == b0 && b0 > 0 && keys[b0 - 1] == key;
    const bool goes_on = e == b1 && b1 < n && keys[b1] == key;
    float* out = begun_before ? head + size_t(c) * dim : (goes_on ? tail + size_t(c) * dim : nullptr);
    float* d = dst + size_t(key) * dim;
    for (int col = threadIdx.x; col < dim; col += blockDim.x) {
      float piece = 0.f;
#pragma unroll 8  // several loads in flight; the additions stay in order
      for (int j = s; j < e; ++j) piece += src[size_t(pos[j]) * dim + col];
      if (out)
        out[col] = piece;
      else
        d[col] += piece;  // the whole run: row + piece
    }
    s = e;
  }
}

// Block c: if a run that began before chunk c ends in it, its row += the run's pieces in
// order: `tail` of the chunk it began in, then `head` of each later chunk up to c.
__global__ void scatter_combine_kernel(const int32_t* keys, float* dst, const float* head,
                                       const float* tail, int n, int dim) {
  const int c = blockIdx.x, b0 = c * kPiece, b1 = kern::scatter_piece_end(b0, n);
  if (b0 == 0) return;
  const int32_t key = keys[b0];
  if (keys[b0 - 1] != key) return;                          // no run crosses into chunk c
  if (keys[b1 - 1] == key && b1 < n && keys[b1] == key) return;  // it goes on past chunk c
  int first = c;  // the chunk the run began in
  while (first > 0 && keys[first * kPiece - 1] == key) --first;
  float* d = dst + size_t(key) * dim;
  for (int col = threadIdx.x; col < dim; col += blockDim.x) {
    float acc = d[col] + tail[size_t(first) * dim + col];
#pragma unroll 8  // a token type's run has ~500 pieces: keep loads in flight, adds in order
    for (int k = first + 1; k <= c; ++k) acc += head[size_t(k) * dim + col];
    d[col] = acc;
  }
}

}  // namespace

void CudaOps::scatter_add_rows(const int32_t* index, const float* src, float* dst, int n, int dim) {
  if (n <= 0 || dim <= 0) return;
  // Workspace: sorted keys, positions (in and out), CUB's temporary storage (queried with the
  // same bit range as the sort below) and the parked pieces (head and tail per chunk).
  size_t temp_bytes = 0;
  CUDA_CHECK(cub::DeviceRadixSort::SortPairs(
      nullptr, temp_bytes, static_cast<const int32_t*>(nullptr), static_cast<int32_t*>(nullptr),
      static_cast<const int32_t*>(nullptr), static_cast<int32_t*>(nullptr), n, 0, 31));
  const int chunks = (n + kPiece - 1) / kPiece;
  sort_keys_.reserve(size_t(n) * sizeof(int32_t));
  sort_values_.reserve(size_t(2) * n * sizeof(int32_t));
  sort_temp_.reserve(temp_bytes > 0 ? temp_bytes : 256);  // a null pointer would mean "size query"
  scatter_pieces_.reserve(size_t(2) * chunks * dim * sizeof(float));
  auto* keys = static_cast<int32_t*>(sort_keys_.get());
  auto* pos_in = static_cast<int32_t*>(sort_values_.get());
  int32_t* pos_out = pos_in + n;
  auto* head = static_cast<float*>(scatter_pieces_.get());
  float* tail = head + size_t(chunks) * dim;

  iota_kernel<<<(n + kThreads - 1) / kThreads, kThreads, 0, stream()>>>(pos_in, n);
  LB_LAUNCH_CHECK();
  size_t temp = sort_temp_.bytes();
  // Indices are non-negative, so sorting 31 bits suffices; radix sort is stable, which keeps
  // positions of equal indices ascending.
  CUDA_CHECK(cub::DeviceRadixSort::SortPairs(sort_temp_.get(), temp, index, keys, pos_in, pos_out,
                                             n, 0, 31, stream()));
  scatter_pieces_kernel<<<chunks, kScatterThreads, 0, stream()>>>(keys, pos_out, src, dst, head, tail, n, dim);
  LB_LAUNCH_CHECK();
  scatter_combine_kernel<<<chunks, kScatterThreads, 0, stream()>>>(keys, dst, head, tail, n, dim);
  LB_LAUNCH_CHECK();
}

void CudaOps::embedding_forward(const int32_t* ids, const float* table, float* out, int n, int dim,
                                bool accumulate) {
  const size_t total = size_t(n) * dim;
  if (accumulate)
    launch_map(total, stream(),
               [=] __device__(size_t e) { out[e] += table[size_t(ids[e / dim]) * dim + e % dim]; });
  else
    launch_map(total, stream(),
               [=] __device__(size_t e) { out[e] = table[size_t(ids[e / dim]) * dim + e % dim]; });
}

void CudaOps::embedding_backward(const int32_t* ids, const float* dout, float* dtable, int n,
                                 int dim) {
  scatter_add_rows(ids, dout, dtable, n, dim);
}

void CudaOps::gather_rows_forward(const float* src, const int32_t* index, float* dst, int n,
                                  int dim) {
  embedding_forward(index, src, dst, n, dim, false);
}

void CudaOps::gather_rows_backward(const float* ddst, const int32_t* index, float* dsrc, int n,
                                   int dim) {
  scatter_add_rows(index, ddst, dsrc, n, dim);
}

}  // namespace lansbert::cuda
