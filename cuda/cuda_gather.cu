// Row gathers on the GPU (embedding lookups, masked-position gathers) and their scatter-add
// gradients. The scatters must not depend on thread timing, so no float atomics: the indices
// are stably sorted with their positions (cub::DeviceRadixSort), and one block per distinct
// destination row adds that row's sources in ascending position, starting from the existing
// gradient. That is exactly the CPU twin's order (src/cpu/cpu_gather.cc), so the result is
// bit-identical to it, and it costs one sort of n int pairs plus a read of the sources.
// Known cost: a destination hit by many rows (token types: 2 rows for B*S tokens) is summed
// serially by one block; fine at BERT's sizes, a segmented tree would be the next step.
#include <cub/device/device_radix_sort.cuh>

#include "cuda_ops.cuh"
#include "launch.cuh"

namespace lansbert::cuda {

namespace {

__global__ void iota_kernel(int32_t* v, int n) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) v[i] = i;
}

// Block k handles the run of equal keys that starts at sorted position k (other blocks exit).
__global__ void segmented_scatter_kernel(const int32_t* keys, const int32_t* pos, const float* src,
                                         float* dst, int n, int dim) {
  const int k = blockIdx.x;
  const int32_t key = keys[k];
  if (k > 0 && keys[k - 1] == key) return;
  int end = k + 1;
  while (end < n && keys[end] == key) ++end;
  float* d = dst + size_t(key) * dim;
  for (int c = threadIdx.x; c < dim; c += blockDim.x) {
    float acc = d[c];
    for (int j = k; j < end; ++j) acc += src[size_t(pos[j]) * dim + c];
    d[c] = acc;
  }
}

}  // namespace

void CudaOps::scatter_add_rows(const int32_t* index, const float* src, float* dst, int n, int dim) {
  if (n <= 0 || dim <= 0) return;
  // Workspace: sorted keys, positions (in and out) and CUB's temporary storage, the latter
  // queried with the same bit range as the sort below.
  size_t temp_bytes = 0;
  CUDA_CHECK(cub::DeviceRadixSort::SortPairs(
      nullptr, temp_bytes, static_cast<const int32_t*>(nullptr), static_cast<int32_t*>(nullptr),
      static_cast<const int32_t*>(nullptr), static_cast<int32_t*>(nullptr), n, 0, 31));
  sort_keys_.reserve(size_t(n) * sizeof(int32_t));
  sort_values_.reserve(size_t(2) * n * sizeof(int32_t));
  sort_temp_.reserve(temp_bytes > 0 ? temp_bytes : 256);  // a null pointer would mean "size query"
  auto* keys = static_cast<int32_t*>(sort_keys_.get());
  auto* pos_in = static_cast<int32_t*>(sort_values_.get());
  int32_t* pos_out = pos_in + n;

  iota_kernel<<<(n + kThreads - 1) / kThreads, kThreads, 0, stream()>>>(pos_in, n);
  LB_LAUNCH_CHECK();
  size_t temp = sort_temp_.bytes();
  // Indices are non-negative, so sorting 31 bits suffices; radix sort is stable, which keeps
  // positions of equal indices ascending.
  CUDA_CHECK(cub::DeviceRadixSort::SortPairs(sort_temp_.get(), temp, index, keys, pos_in, pos_out,
                                             n, 0, 31, stream()));
  segmented_scatter_kernel<<<n, 128, 0, stream()>>>(keys, pos_out, src, dst, n, dim);
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
