// LANS, LAMB and AdamW over device-resident flat buffers: the same three passes as the CPU
// rules in src/optim (norms of the values before modification; moments and update norms;
// apply), with the per-element arithmetic from lansbert/kernels/optim_math.h and the
// per-block scalars (g scale, trust ratios, clipping) computed on the host in double exactly
// as the CPU rules compute them. Reductions are deterministic: one CUDA block per chunk of a
// table block writes a double partial (fixed tree), then one thread per table block adds its
// chunks in order. Only the ~200 per-block sums travel to the host (pinned) and back.
//
// All work runs on the legacy default stream, which orders itself after every blocking
// stream, so the model's gradients (CudaOps' stream) are complete when an update starts.
//
// Sharded updates (Optimizer::set_shard, ZeRO-1 via ShardedStep): chunks cover only the
// slice [shard.begin, shard.end), m and v hold the slice (each chunk carries its offset into
// them), and the per-block sums are summed over the ranks on the host (shard.reduce_sums)
// after each trip to the host, as the CPU rules do. A rank with an empty slice still takes
// part in every reduction. The 16-bit weight copy (FlatBuffers::half_params) is written for
// the slice only.
#include <algorithm>
#include <cmath>
#include <memory>
#include <vector>

#include "cuda_api.h"
#include "cuda_raii.cuh"
#include "device_chunks.h"
#include "lansbert/kernels/half.h"
#include "lansbert/kernels/optim_math.h"
#include "lansbert/optim/trust_steps.h"
#include "launch.cuh"

namespace lansbert::cuda {

namespace {

constexpr int kOptThreads = 256;
const cudaStream_t kStream = cudaStreamLegacy;

// Per-block factors; the meaning of f[] depends on the pass (see each kernel).
struct Factors {
  float f[4];
};

__device__ double block_sum_d(double v) {
  __shared__ double scratch[32];
  return block_sum(v, scratch);
}

// partial[c*K + k]: sum of squares of g (k = 0) and p (k = 1) over chunk c.
template <int K>
__global__ void sumsq_kernel(const DevChunk* chunks, const float* g, const float* p,
                             double* partial) {
  const DevChunk ch = chunks[blockIdx.x];
  double s[K] = {};
  for (size_t i = ch.begin + threadIdx.x; i < ch.end; i += blockDim.x) {
    s[0] += double(g[i]) * g[i];
    if (K > 1) s[K - 1] += double(p[i]) * p[i];
  }
  for (int k = 0; k < K; ++k) {
    const double t = block_sum_d(s[k]);
    if (threadIdx.x == 0) partial[blockIdx.x * K + k] = t;
  }
}

// sums[b*K + k] = sum over block b's chunks, in order, of partial[c*K + k].
__global__ void by_block_kernel(const int* first_chunk, int blocks, int K, const double* partial,
                                double* sums) {
  const int t = blockIdx.x * blockDim.x + threadIdx.x;
  if (t >= blocks * K) return;
  const int b = t / K, k = t % K;
  double s = 0;
  for (int c = first_chunk[b]; c < first_chunk[b + 1]; ++c) s += partial[c * K + k];
  sums[t] = s;
}

// LANS pass 2. f = {g_scale, wd}. partial = ||u_m||^2, ||u_g||^2 per chunk.
__global__ void lans_moments_kernel(const DevChunk* chunks, const Factors* fac, FlatBuffers buf,
                                    AdamConsts<float> c, double* partial) {
  const DevChunk ch = chunks[blockIdx.x];
  const float gs = fac[ch.block].f[0], wd = fac[ch.block].f[1];
  double sm = 0, sg = 0;
  for (size_t i = ch.begin + threadIdx.x; i < ch.end; i += blockDim.x) {
    const float gh = buf.grads[i] * gs;
    const size_t j = ch.state + (i - ch.begin);
    float m = buf.m[j], v = buf.v[j];
    adam_moments(gh, c, m, v);
    buf.m[j] = m;
    buf.v[j] = v;
    const LansDirections<float> u = lans_directions(gh, m, v, buf.params[i], wd, c);
    sm += double(u.um) * u.um;
    sg += double(u.ug) * u.ug;
  }
  sm = block_sum_d(sm);
  sg = block_sum_d(sg);
  if (threadIdx.x == 0) {
    partial[2 * blockIdx.x] = sm;
    partial[2 * blockIdx.x + 1] = sg;
  }
}

// LANS pass 3. f = {g_scale, wd, step_m, step_g}. Writes buf.half_params too, when set.
__global__ void lans_apply_kernel(const DevChunk* chunks, const Factors* fac, FlatBuffers buf,
                                  AdamConsts<float> c) {
  const DevChunk ch = chunks[blockIdx.x];
  const Factors f = fac[ch.block];
  for (size_t i = ch.begin + threadIdx.x; i < ch.end; i += blockDim.x) {
    const float p = buf.params[i];
    const size_t j = ch.state + (i - ch.begin);
    const LansDirections<float> u =
        lans_directions(buf.grads[i] * f.f[0], buf.m[j], buf.v[j], p, f.f[1], c);
    const float q = lans_apply(p, u, f.f[2], f.f[3]);
    buf.params[i] = q;
    if (buf.half_params) buf.half_params[i] = kern::float_to_half(q, buf.half_format);
  }
}

// LAMB pass 2. f = {wd}. partial = ||u||^2 per chunk.
__global__ void lamb_moments_kernel(const DevChunk* chunks, const Factors* fac, FlatBuffers buf,
                                    AdamConsts<float> c, float clip, double* partial) {
  const DevChunk ch = chunks[blockIdx.x];
  const float wd = fac[ch.block].f[0];
  double su = 0;
  for (size_t i = ch.begin + threadIdx.x; i < ch.end; i += blockDim.x) {
    const size_t j = ch.state + (i - ch.begin);
    float m = buf.m[j], v = buf.v[j];
    adam_moments(buf.grads[i] / clip, c, m, v);
    buf.m[j] = m;
    buf.v[j] = v;
    const float u = adam_direction(m, v, buf.params[i], wd, c);
    su += double(u) * u;
  }
  su = block_sum_d(su);
  if (threadIdx.x == 0) partial[blockIdx.x] = su;
}

// LAMB pass 3 (f = {wd, step}) and AdamW's single pass (f = {wd, lr}, fused moments).
template <bool kFusedMoments>
__global__ void adam_apply_kernel(const DevChunk* chunks, const Factors* fac, FlatBuffers buf,
                                  AdamConsts<float> c, float clip) {
  const DevChunk ch = chunks[blockIdx.x];
  const float wd = fac[ch.block].f[0], step = fac[ch.block].f[1];
  for (size_t i = ch.begin + threadIdx.x; i < ch.end; i += blockDim.x) {
    const size_t j = ch.state + (i - ch.begin);
    float m = buf.m[j], v = buf.v[j];
    if (kFusedMoments) {
      adam_moments(buf.grads[i] / clip, c, m, v);
      buf.m[j] = m;
      buf.v[j] = v;
    }
    const float p = buf.params[i];
    const float q = p - step * adam_direction(m, v, p, wd, c);
    buf.params[i] = q;
    if (buf.half_params) buf.half_params[i] = kern::float_to_half(q, buf.half_format);
  }
}

class DeviceOptimizer final : public Optimizer {
 public:
  explicit DeviceOptimizer(OptimizerConfig c) : Optimizer(std::move(c)) {}
  void update(const ParamTable& table, const FlatBuffers& buf, int64_t t, double lr,
              UpdateStats* stats) override;

 private:
  void prepare(const ParamTable& table);
  // Launches the chunk kernels' reduction into per-block sums and copies them to sums_.
  void sums_to_host(int K);
  void upload_factors();
  // LANS's and LAMB's first pass: per-block sums of squares of the gradients and the
  // parameters. Leaves them in sums_ (2 per block), fills param_norm[b] = ||p_b|| and
  // returns the global sum of squares of the gradients (blocks added in order).
  double grad_and_param_norms(const FlatBuffers& buf, std::vector<double>* param_norm);
  void update_lans(const FlatBuffers& buf, const AdamConsts<float>& c, double lr, UpdateStats* st);
  void update_lamb(const FlatBuffers& buf, const AdamConsts<float>& c, double lr, UpdateStats* st);
  void update_adamw(const FlatBuffers& buf, const AdamConsts<float>& c, double lr, UpdateStats* st);

  DeviceChunkPlan plan_;  // the table and shard the chunks were cut for
  std::vector<float> wd_;
  int nblocks_ = 0, nchunks_ = 0;
  DeviceBytes chunks_, first_chunk_, partial_, sums_dev_, factors_dev_;
  PinnedBuffer<double> sums_;
  PinnedBuffer<Factors> factors_;
};

void DeviceOptimizer::prepare(const ParamTable& table) {
  if (plan_.matches(table, shard_.begin, shard_.end)) return;
  std::vector<DevChunk> chunks;
  std::vector<int> first;
  // The part of each block inside the shard (all of it unsharded), cut as the CPU's plan.
  plan_.cut(table, shard_.begin, shard_.end, &chunks, &first);
  wd_.clear();
  for (size_t b = 0; b < table.size(); ++b) wd_.push_back(static_cast<float>(config_.decay_for(table[b].role)));
  nblocks_ = static_cast<int>(table.size());
  nchunks_ = static_cast<int>(chunks.size());
  chunks_.reserve(chunks.size() * sizeof(DevChunk));
  first_chunk_.reserve(first.size() * sizeof(int));
  partial_.reserve(chunks.size() * 2 * sizeof(double));
  sums_dev_.reserve(table.size() * 2 * sizeof(double));
  factors_dev_.reserve(table.size() * sizeof(Factors));
  sums_.resize(table.size() * 2);
  factors_.resize(table.size());
  if (!chunks.empty())  // an empty slice has no chunk buffer to copy into
    CUDA_CHECK(cudaMemcpy(chunks_.get(), chunks.data(), chunks.size() * sizeof(DevChunk),
                          cudaMemcpyHostToDevice));
  CUDA_CHECK(cudaMemcpy(first_chunk_.get(), first.data(), first.size() * sizeof(int),
                        cudaMemcpyHostToDevice));
}

void DeviceOptimizer::sums_to_host(int K) {
  const int n = nblocks_ * K;
  by_block_kernel<<<(n + kOptThreads - 1) / kOptThreads, kOptThreads, 0, kStream>>>(
      static_cast<const int*>(first_chunk_.get()), nblocks_, K,
      static_cast<const double*>(partial_.get()), static_cast<double*>(sums_dev_.get()));
  LB_LAUNCH_CHECK();
  CUDA_CHECK(cudaMemcpyAsync(sums_.data(), sums_dev_.get(), n * sizeof(double),
                             cudaMemcpyDeviceToHost, kStream));
  CUDA_CHECK(cudaStreamSynchronize(kStream));
  if (shard_.reduce_sums) shard_.reduce_sums(sums_.data(), n);  // whole-tensor sums
}

void DeviceOptimizer::upload_factors() {
  CUDA_CHECK(cudaMemcpyAsync(factors_dev_.get(), factors_.data(), nblocks_ * sizeof(Factors),
                             cudaMemcpyHostToDevice, kStream));
}

void DeviceOptimizer::update(const ParamTable& table, const FlatBuffers& buf, int64_t t, double lr,
                             UpdateStats* stats) {
  prepare(table);
  if (nchunks_ == 0 && !shard_.sharded()) return;  // a sharded rank still joins the reductions
  const AdamConsts<float> c = adam_consts(config_, t);
  if (config_.name == "lans")
    update_lans(buf, c, lr, stats);
  else if (config_.name == "lamb")
    update_lamb(buf, c, lr, stats);
  else
    update_adamw(buf, c, lr, stats);
}

}  // namespace

namespace {

const DevChunk* as_chunks(const DeviceBytes& b) {
  return static_cast<const DevChunk*>(b.get());
}
const Factors* as_factors(const DeviceBytes& b) {
  return static_cast<const Factors*>(b.get());
}
double* as_partial(const DeviceBytes& b) {
  return static_cast<double*>(b.get());
}

}  // namespace

// Pinned factors_ are rewritten only after a sums_to_host() synchronisation, so an earlier
// upload from them has always completed.
double DeviceOptimizer::grad_and_param_norms(const FlatBuffers& buf, std::vector<double>* param_norm) {
  if (nchunks_ > 0) {
    sumsq_kernel<2><<<nchunks_, kOptThreads, 0, kStream>>>(as_chunks(chunks_), buf.grads, buf.params,
                                                           as_partial(partial_));
    LB_LAUNCH_CHECK();
  }
  sums_to_host(2);
  double g2 = 0;
  param_norm->assign(nblocks_, 0.0);
  for (int b = 0; b < nblocks_; ++b) {
    g2 += sums_[2 * b];
    (*param_norm)[b] = std::sqrt(sums_[2 * b + 1]);
  }
  return g2;
}

void DeviceOptimizer::update_lans(const FlatBuffers& buf, const AdamConsts<float>& c, double lr,
                                  UpdateStats* stats) {
  std::vector<double> param_norm;
  const double g2 = grad_and_param_norms(buf, &param_norm);
  for (int b = 0; b < nblocks_; ++b) {
    const double gn = std::sqrt(sums_[2 * b]);
    factors_[b] = {{gn != 0 ? static_cast<float>(1.0 / (gn + config_.eps)) : 1.0f, wd_[b], 0, 0}};
  }
  upload_factors();
  if (nchunks_ > 0) {
    lans_moments_kernel<<<nchunks_, kOptThreads, 0, kStream>>>(
        as_chunks(chunks_), as_factors(factors_dev_), buf, c, as_partial(partial_));
    LB_LAUNCH_CHECK();
  }
  sums_to_host(2);
  lans_step_sizes(
      config_, lr, size_t(nblocks_), sums_.data(), [&](size_t b) { return param_norm[b]; },
      [&](size_t b, float step_m, float step_g) {
        factors_[b].f[2] = step_m;
        factors_[b].f[3] = step_g;
      },
      stats);
  upload_factors();
  if (nchunks_ > 0) {
    lans_apply_kernel<<<nchunks_, kOptThreads, 0, kStream>>>(as_chunks(chunks_),
                                                             as_factors(factors_dev_), buf, c);
    LB_LAUNCH_CHECK();
  }
  if (stats) {
    stats->grad_norm = std::sqrt(g2);
    stats->clip_divisor = 1.0;
  }
}

void DeviceOptimizer::update_lamb(const FlatBuffers& buf, const AdamConsts<float>& c, double lr,
                                  UpdateStats* stats) {
  std::vector<double> param_norm;
  const double g2 = grad_and_param_norms(buf, &param_norm);
  for (int b = 0; b < nblocks_; ++b) factors_[b] = {{wd_[b], 0, 0, 0}};
  const double G = std::sqrt(g2);
  const double clip = clip_divisor(G, config_.max_grad_norm);
  upload_factors();
  if (nchunks_ > 0) {
    lamb_moments_kernel<<<nchunks_, kOptThreads, 0, kStream>>>(
        as_chunks(chunks_), as_factors(factors_dev_), buf, c, static_cast<float>(clip),
        as_partial(partial_));
    LB_LAUNCH_CHECK();
  }
  sums_to_host(1);
  lamb_step_sizes(
      config_, lr, size_t(nblocks_), sums_.data(), [&](size_t b) { return param_norm[b]; }, [&](size_t b) { return wd_[b]; },
      [&](size_t b, float step) { factors_[b].f[1] = step; }, stats);
  upload_factors();
  if (nchunks_ > 0) {
    adam_apply_kernel<false><<<nchunks_, kOptThreads, 0, kStream>>>(
        as_chunks(chunks_), as_factors(factors_dev_), buf, c, static_cast<float>(clip));
    LB_LAUNCH_CHECK();
  }
  if (stats) {
    stats->grad_norm = G;
    stats->clip_divisor = clip;
  }
}

void DeviceOptimizer::update_adamw(const FlatBuffers& buf, const AdamConsts<float>& c, double lr,
                                   UpdateStats* stats) {
  if (nchunks_ > 0) {
    sumsq_kernel<1><<<nchunks_, kOptThreads, 0, kStream>>>(as_chunks(chunks_), buf.grads, nullptr,
                                                           as_partial(partial_));
    LB_LAUNCH_CHECK();
  }
  sums_to_host(1);
  double g2 = 0;
  for (int b = 0; b < nblocks_; ++b) {
    g2 += sums_[b];
    factors_[b] = {{wd_[b], static_cast<float>(lr), 0, 0}};
  }
  const double G = std::sqrt(g2);
  // The CPU rule rounds the divisor to float before reporting it; so does this.
  const float clip = static_cast<float>(clip_divisor(G, config_.max_grad_norm));
  upload_factors();
  if (nchunks_ > 0) {
    adam_apply_kernel<true><<<nchunks_, kOptThreads, 0, kStream>>>(
        as_chunks(chunks_), as_factors(factors_dev_), buf, c, clip);
    LB_LAUNCH_CHECK();
  }
  if (stats) {
    stats->grad_norm = G;
    stats->clip_divisor = clip;
    stats->trust_ratio.clear();
    stats->trust_ratio_grad.clear();
  }
}

Status make_device_optimizer(const std::string& name, const OptimizerConfig& config,
                             std::unique_ptr<Optimizer>* out) {
  // Validation and the name check are the CPU factory's; the rule object is replaced.
  std::unique_ptr<Optimizer> cpu;
  LB_RETURN_IF_ERROR(make_optimizer(name, config, &cpu));
  *out = std::make_unique<DeviceOptimizer>(cpu->config());
  return Status::ok();
}

}  // namespace lansbert::cuda
