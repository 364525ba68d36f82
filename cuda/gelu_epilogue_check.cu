// The one-time checks behind the GELU epilogues (CudaOps::gemm_bias_gelu_half and
// gemm_dgelu_bias_half). cublasLt.h documents GELU_AUX_BIAS and DGELU_BGRAD but not their GELU
// (it is the tanh approximation by every account, not a documented one), nor an fp32 bias or
// bias gradient beside a 16-bit D. So the first call cuBLASLt accepts is recomputed the
// unfused way from an fp32 GEMM of the same operands and compared element by element; a
// disagreement sends this and every later call to the unfused kernels. Every row is checked,
// kCheckRows at a time (bounded scratch); the probe runs on the first kCheckRows. One
// synchronisation, once per epilogue.
//
// What the tolerances are for: catching an epilogue that computes something else (the bias
// misread, the aux written before the bias or not at all, no GELU, a bias gradient written in
// the wrong type or summed over the wrong axis), not telling two GELU approximations apart:
// the erf and tanh forms differ by at most 4.7e-4, about bf16's rounding of an output near 0.1.
#include <algorithm>
#include <cstdio>

#include "cuda_ops.cuh"
#include "lansbert/kernels/activations.h"
#include "launch.cuh"

namespace lansbert::cuda {

namespace {

// The rounding of a 16-bit result (relative), and what another fp32 summation order or
// another tanh evaluation can move a value by (relative to the magnitudes summed: the value's,
// the bias's and the column's mean |acc|, for sums that nearly cancel).
float rounding_of(kern::HalfFormat f) { return f == kern::HalfFormat::kBf16 ? 0x1p-7f : 0x1p-10f; }
constexpr float kOrderSlack = 0x1p-8f;

// GELU_AUX_BIAS: aux against round(acc + bias), D against round(gelu(acc + bias)).
void count_gelu_far(const uint16_t* d, const uint16_t* aux, const float* acc, const float* bias, const float* scale,
                    int rows, int cols, kern::HalfFormat f, unsigned* count, cudaStream_t s) {
  const float eps = rounding_of(f);
  launch_map(size_t(rows) * cols, s, [=] __device__(size_t i) {
    const size_t c = i % size_t(cols);
    const float b = bias[c], v = acc[i] + b;
    const float slack = kOrderSlack * (fabsf(acc[i]) + fabsf(b) + scale[c]);
    const float want_aux = kern::round_to_half(v, f);
    const float want_d = kern::round_to_half(kern::gelu_tanh(v), f);
    const float got_aux = kern::half_to_float(aux[i], f), got_d = kern::half_to_float(d[i], f);
    const bool aux_ok = fabsf(got_aux - want_aux) <= eps * fabsf(want_aux) + slack;
    const bool d_ok = fabsf(got_d - want_d) <= eps * fabsf(want_d) + 1.2f * slack + 0x1p-10f * fabsf(v);
    if (!aux_ok || !d_ok) atomicAdd(count, 1u);  // NaN compares false: counted
  });
}

// DGELU_BGRAD: D against round(gelu'(aux) acc), and the column sums of gelu'(aux) acc and of
// their magnitudes added into sum and magnitude (one thread a column, chunk after chunk: the
// bias gradient's reference over every row).
void count_dgelu_far(const uint16_t* d, const uint16_t* aux, const float* acc, const float* scale, int rows, int cols,
                     kern::HalfFormat f, unsigned* count, float* sum, float* magnitude, cudaStream_t s) {
  const float eps = rounding_of(f);
  launch_map(size_t(rows) * cols, s, [=] __device__(size_t i) {
    const float slope = kern::gelu_tanh_grad(1.0f, kern::half_to_float(aux[i], f));
    const float want = kern::round_to_half(slope * acc[i], f);
    const float got = kern::half_to_float(d[i], f);
    const float slack = kOrderSlack * (fabsf(acc[i]) + scale[i % size_t(cols)]) * (fabsf(slope) + 0.25f);
    if (!(fabsf(got - want) <= eps * fabsf(want) + slack)) atomicAdd(count, 1u);
  });
  launch_map(size_t(cols), s, [=] __device__(size_t c) {
    float part = 0, size = 0;
    for (int r = 0; r < rows; ++r) {
      const size_t i = size_t(r) * cols + c;
      const float g = kern::gelu_tanh_grad(acc[i], kern::half_to_float(aux[i], f));
      part += g;
      size += fabsf(g);
    }
    sum[c] += part;
    magnitude[c] += size;
  });
}

// Each bias gradient against its column's sum within 2^-7 of the column's sum of magnitudes
// (rounded or not before summing, in any order).
void count_bias_grad_far(const float* bias_grad, const float* sum, const float* magnitude, int cols, unsigned* count,
                         cudaStream_t s) {
  launch_map(size_t(cols), s, [=] __device__(size_t c) {
    if (!(fabsf(bias_grad[c] - sum[c]) <= 0x1p-7f * magnitude[c] + 1e-30f)) atomicAdd(count, 1u);
  });
}

}  // namespace

bool CudaOps::gelu_epilogue_agrees(const LtBiasMatmul::Call& call) {
  const bool forward = call.epilogue == LtBiasMatmul::Epilogue::kGeluAuxBias;
  Checked& state = gelu_epilogue_[forward ? 0 : 1];
  if (state != Checked::kNotYet) return state == Checked::kAgrees;
  const int m = call.m, n = call.n, k = call.k, chunk = std::min(m, kCheckRows);
  const size_t elems = size_t(chunk) * n;
  const kern::HalfFormat f = gemm_half_format(options_.math);
  // Per chunk of rows: the fp32 accumulator and its column scale; (forward) a probe bias and
  // the probe call's two outputs, its first chunk only; (backward) the bias gradient's column
  // sums and magnitudes; the count.
  DeviceBytes scratch(elems * sizeof(float) + 3 * n * sizeof(float) + 2 * elems * sizeof(uint16_t) +
                      sizeof(unsigned));
  float* acc = static_cast<float*>(scratch.get());
  float* scale = acc + elems;
  float* probe_bias = scale + n;   // forward's probe bias ...
  float* column_sums = probe_bias;  // ... or, over the same floats, backward's bias-gradient sums
  float* magnitude = column_sums + n;
  uint16_t* probe_d = reinterpret_cast<uint16_t*>(magnitude + n);
  uint16_t* probe_aux = probe_d + elems;
  unsigned* count = reinterpret_cast<unsigned*>(probe_aux + elems);
  bool probed = true;
  if (forward) {  // BERT's biases start at zero: a misread fp32 bias shows only with a probe
    fill_probe_bias(probe_bias, n, stream());
    LtBiasMatmul::Call probe = call;
    probe.m = chunk;
    probe.bias = probe_bias;
    probe.c = probe_d;
    probe.aux = probe_aux;
    probed = lt_.run(probe, stream());
  } else {
    CUDA_CHECK(cudaMemsetAsync(column_sums, 0, 2 * n * sizeof(float), stream()));  // and magnitude
  }
  CUDA_CHECK(cudaMemsetAsync(count, 0, sizeof(unsigned), stream()));
  const auto* d = static_cast<const uint16_t*>(call.c);
  const auto* aux = static_cast<const uint16_t*>(call.aux);
  for (int r0 = 0; r0 < m; r0 += chunk) {
    const int rows = std::min(chunk, m - r0);
    const size_t at = size_t(r0) * n;
    gemm_ex(call.ta, call.tb, rows, n, k, 1.0f, gemm_operand_row(call.a, call.a_type, call.ta, call.lda, r0),
            call.a_type, call.lda, call.b, call.b_type, call.ldb, 0.0f, acc, CUDA_R_32F, n);
    column_scale(acc, rows, n, scale, stream());
    if (forward) {
      count_gelu_far(d + at, aux + at, acc, call.bias, scale, rows, n, f, count, stream());
      if (r0 == 0 && probed) count_gelu_far(probe_d, probe_aux, acc, probe_bias, scale, rows, n, f, count, stream());
    } else {
      count_dgelu_far(d + at, aux + at, acc, scale, rows, n, f, count, column_sums, magnitude, stream());
    }
  }
  if (!forward) count_bias_grad_far(call.bias, column_sums, magnitude, n, count, stream());
  const unsigned far = count_after_drain(count, stream());  // scratch is freed on return
  const bool agrees = probed && far == 0;
  const char* name = forward ? "GELU_AUX_BIAS" : "DGELU_BGRAD";
  if (agrees)
    std::fprintf(stderr, "lansbert: cuBLASLt: %s epilogue checked against the unfused kernels (%dx%dx%d): used\n",
                 name, m, n, k);
  else
    std::fprintf(stderr, "lansbert: cuBLASLt: %s epilogue %s (%dx%dx%d, %u elements apart): unfused kernels used\n",
                 name, probed ? "disagrees with the unfused kernels" : "refused for the probe bias", m, n, k, far);
  state = agrees ? Checked::kAgrees : Checked::kDisagrees;
  return agrees;
}

}  // namespace lansbert::cuda
