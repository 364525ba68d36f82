// Mixed-precision helpers over device buffers: the bf16 cast (shared rounding body
// lansbert/kernels/half.h) and the loss scaler's unscale-and-check, the device twin of
// LossScaler::unscale_and_check (same float(1/scale) multiply, same optim_is_finite test,
// counts per table block; chunks of a block counted in parallel, the counts added exactly).
// Both run on the legacy default stream, which is ordered after the model's blocking stream.
#include <algorithm>
#include <memory>
#include <vector>

#include "cuda_api.h"
#include "cuda_raii.cuh"
#include "device_chunks.h"
#include "lansbert/kernels/half.h"
#include "lansbert/kernels/optim_math.h"
#include "launch.cuh"

namespace lansbert::cuda {

namespace {

const cudaStream_t kStream = cudaStreamLegacy;
// One CUDA block per chunk: unscale, then count non-finite values and add the count to the
// chunk's table block (integer atomics: exact in any order). Chunks, not whole table blocks,
// so bert-large's 31M-element word embedding is spread over the device, not one block.
__global__ void unscale_check_kernel(const DevChunk* chunks, float* grads, bool unscale, float inv,
                                     unsigned long long* bad) {
  __shared__ unsigned long long scratch[32];
  const DevChunk ch = chunks[blockIdx.x];
  unsigned long long count = 0;
  for (size_t i = ch.begin + threadIdx.x; i < ch.end; i += blockDim.x) {
    float g = grads[i];
    if (unscale) grads[i] = g = g * inv;  // unscale first: a finite value can overflow
    count += optim_is_finite(g) ? 0 : 1;
  }
  count = block_sum(count, scratch);
  if (threadIdx.x == 0 && count) atomicAdd(&bad[ch.block], count);
}

// One CUDA block per chunk: the chunk's sum of g² in double (as the CPU's sum_squares adds
// each double(g)²), written to its own slot.
__global__ void sum_squares_kernel(const DevChunk* chunks, const float* grads, double* partial) {
  __shared__ double scratch[32];
  const DevChunk ch = chunks[blockIdx.x];
  double s = 0;
  for (size_t i = ch.begin + threadIdx.x; i < ch.end; i += blockDim.x) {
    const double g = grads[i];
    s += g * g;
  }
  s = block_sum(s, scratch);
  if (threadIdx.x == 0) partial[blockIdx.x] = s;
}

// What a check needs besides the gradients, kept between calls (a check runs every update):
// the chunk list of the last table and the counters. Rebuilt when the table or the current
// device changes; before, every call allocated and freed device and pinned memory, each a
// device-wide synchronisation.
struct CheckWorkspace {
  int device = -1;
  DeviceChunkPlan plan;  // the table and range (a sharded update's slice) the chunks were cut for
  unsigned nchunks = 0;
  DeviceBytes chunks, bad, partial;  // partial: a double per chunk (gradient_sum_squares)
  PinnedBuffer<unsigned long long> host_bad;
  PinnedBuffer<double> host_partial;

  void prepare(const ParamTable& table, size_t lo, size_t hi) {
    if (plan.matches(table, lo, hi)) return;
    std::vector<DevChunk> list;
    plan.cut(table, lo, hi, &list);
    nchunks = static_cast<unsigned>(list.size());
    chunks.reserve(std::max<size_t>(list.size(), 1) * sizeof(DevChunk));
    bad.reserve(table.size() * sizeof(unsigned long long));
    host_bad.resize(table.size());
    partial.reserve(std::max<size_t>(list.size(), 1) * sizeof(double));
    host_partial.resize(std::max<size_t>(list.size(), 1));
    CUDA_CHECK(cudaMemcpy(chunks.get(), list.data(), list.size() * sizeof(DevChunk), cudaMemcpyHostToDevice));
  }
};

// One per use and process, which drives one device (a change of device starts afresh): the
// check's (a sharded update's slice) and the sum of squares' (the whole table, once per
// update with logging.noise_scale) each keep their own chunk list rather than cutting it anew
// every update.
enum class WorkspaceUse { kCheck, kSumSquares };
CheckWorkspace& check_workspace(int dev, WorkspaceUse use = WorkspaceUse::kCheck) {
  static std::unique_ptr<CheckWorkspace> ws[2];
  std::unique_ptr<CheckWorkspace>& w = ws[use == WorkspaceUse::kCheck ? 0 : 1];
  if (!w || w->device != dev) {
    w = std::make_unique<CheckWorkspace>();
    w->device = dev;
  }
  return *w;
}

}  // namespace

void cast_to_bf16(const float* src, uint16_t* dst, size_t n) {
  if (n == 0) return;
  map_kernel<<<grid_for(n), kThreads, 0, kStream>>>(
      n, [=] __device__(size_t i) { dst[i] = kern::float_to_bf16(src[i]); });
  LB_LAUNCH_CHECK();
}

GradCheck unscale_and_check(const ParamTable& table, float* grads, double scale, size_t begin, size_t end) {
  GradCheck check;
  const size_t nb = table.size();
  if (nb == 0) return check;
  end = std::min(end, table.total_elements());
  begin = std::min(begin, end);
  int dev = 0;
  CUDA_CHECK(cudaGetDevice(&dev));
  CheckWorkspace& ws = check_workspace(dev);
  ws.prepare(table, begin, end);  // a no-op when the plan is still this table's and range's
  auto* bad = static_cast<unsigned long long*>(ws.bad.get());
  CUDA_CHECK(cudaMemsetAsync(bad, 0, nb * sizeof(unsigned long long), kStream));
  if (ws.nchunks > 0) {
    unscale_check_kernel<<<ws.nchunks, kThreads, 0, kStream>>>(
        static_cast<const DevChunk*>(ws.chunks.get()), grads, scale != 1.0, static_cast<float>(1.0 / scale), bad);
    LB_LAUNCH_CHECK();
  }
  CUDA_CHECK(cudaMemcpyAsync(ws.host_bad.data(), bad, nb * sizeof(unsigned long long), cudaMemcpyDeviceToHost,
                             kStream));
  CUDA_CHECK(cudaStreamSynchronize(kStream));
  for (size_t b = 0; b < nb; ++b) {
    if (ws.host_bad[b]) check.nonfinite_blocks.push_back(b);
    check.nonfinite_values += ws.host_bad[b];
  }
  check.finite = check.nonfinite_values == 0;
  return check;
}

double gradient_sum_squares(const ParamTable& table, const float* grads) {
  const size_t n = table.total_elements();
  if (table.size() == 0 || n == 0) return 0;
  int dev = 0;
  CUDA_CHECK(cudaGetDevice(&dev));
  CheckWorkspace& ws = check_workspace(dev, WorkspaceUse::kSumSquares);
  ws.prepare(table, 0, n);
  if (ws.nchunks == 0) return 0;
  auto* partial = static_cast<double*>(ws.partial.get());
  sum_squares_kernel<<<ws.nchunks, kThreads, 0, kStream>>>(static_cast<const DevChunk*>(ws.chunks.get()), grads,
                                                           partial);
  LB_LAUNCH_CHECK();
  CUDA_CHECK(cudaMemcpyAsync(ws.host_partial.data(), partial, ws.nchunks * sizeof(double), cudaMemcpyDeviceToHost,
                             kStream));
  CUDA_CHECK(cudaStreamSynchronize(kStream));
  double s = 0;
  for (unsigned c = 0; c < ws.nchunks; ++c) s += ws.host_partial[c];
  return s;
}

}  // namespace lansbert::cuda
