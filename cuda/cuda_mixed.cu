// Mixed-precision helpers over device buffers: the bf16 cast (shared rounding body
// lansbert/kernels/half.h) and the loss scaler's unscale-and-check, the device twin of
// LossScaler::unscale_and_check (same float(1/scale) multiply, same optim_is_finite test,
// counts per table block). Both run on the legacy default stream, which is ordered after the
// model's blocking stream.
#include <vector>

#include "cuda_api.h"
#include "cuda_raii.cuh"
#include "lansbert/kernels/half.h"
#include "lansbert/kernels/optim_math.h"
#include "launch.cuh"

namespace lansbert::cuda {

namespace {

const cudaStream_t kStream = cudaStreamLegacy;

// One CUDA block per table block: unscale, then count non-finite values (integer sums,
// exact in any order).
__global__ void unscale_check_kernel(const size_t* offsets, const size_t* numels, float* grads,
                                     bool unscale, float inv, unsigned long long* bad) {
  __shared__ unsigned long long scratch[32];
  const size_t begin = offsets[blockIdx.x], end = begin + numels[blockIdx.x];
  unsigned long long count = 0;
  for (size_t i = begin + threadIdx.x; i < end; i += blockDim.x) {
    float g = grads[i];
    if (unscale) grads[i] = g = g * inv;  // unscale first: a finite value can overflow
    count += optim_is_finite(g) ? 0 : 1;
  }
  count = block_sum(count, scratch);
  if (threadIdx.x == 0) bad[blockIdx.x] = count;
}

}  // namespace

void cast_to_bf16(const float* src, uint16_t* dst, size_t n) {
  if (n == 0) return;
  map_kernel<<<grid_for(n), kThreads, 0, kStream>>>(
      n, [=] __device__(size_t i) { dst[i] = kern::float_to_bf16(src[i]); });
  LB_LAUNCH_CHECK();
}

GradCheck unscale_and_check(const ParamTable& table, float* grads, double scale) {
  GradCheck check;
  const size_t nb = table.size();
  if (nb == 0) return check;
  std::vector<size_t> offsets(nb), numels(nb);
  for (size_t b = 0; b < nb; ++b) {
    offsets[b] = table[b].offset;
    numels[b] = table[b].numel;
  }
  DeviceBytes off_d(nb * sizeof(size_t)), num_d(nb * sizeof(size_t));
  DeviceBytes bad_d(nb * sizeof(unsigned long long));
  PinnedBuffer<unsigned long long> bad(nb);
  CUDA_CHECK(cudaMemcpyAsync(off_d.get(), offsets.data(), nb * sizeof(size_t),
                             cudaMemcpyHostToDevice, kStream));
  CUDA_CHECK(cudaMemcpyAsync(num_d.get(), numels.data(), nb * sizeof(size_t),
                             cudaMemcpyHostToDevice, kStream));
  unscale_check_kernel<<<static_cast<unsigned>(nb), kThreads, 0, kStream>>>(
      static_cast<const size_t*>(off_d.get()), static_cast<const size_t*>(num_d.get()), grads,
      scale != 1.0, static_cast<float>(1.0 / scale), static_cast<unsigned long long*>(bad_d.get()));
  LB_LAUNCH_CHECK();
  CUDA_CHECK(cudaMemcpyAsync(bad.data(), bad_d.get(), nb * sizeof(unsigned long long),
                             cudaMemcpyDeviceToHost, kStream));
  CUDA_CHECK(cudaStreamSynchronize(kStream));
  for (size_t b = 0; b < nb; ++b) {
    if (bad[b]) check.nonfinite_blocks.push_back(b);
    check.nonfinite_values += bad[b];
  }
  check.finite = check.nonfinite_values == 0;
  return check;
}

}  // namespace lansbert::cuda
