// The one-time check behind gemm_bias_kept's epilogue path: cuBLASLt is asked for a 16-bit D
// with an fp32 bias, which cublasLt.h does not document (it describes a bias of D's type). A
// library that accepted the attribute but read the bias as 16-bit values would be silently
// wrong, so the first call cuBLASLt accepts is checked against the fallback's computation (fp32
// GEMM, then bias + rounding in one kernel), twice: with the call's own bias, and with a probe
// bias of non-zero values (BERT initialises biases to zero, and zeros read as 16-bit pairs are
// still zeros, so the real call alone could not tell). One synchronisation, once; the answer
// decides the epilogue for 16-bit outputs in this CudaOps.
#include <cstdio>

#include "cuda_ops.cuh"
#include "launch.cuh"

namespace lansbert::cuda {

// 1.0, 1.25, ..., 2.5 repeating: exact in every format; as fp32 bit patterns their low halves
// are zero and their high halves the value, so a bias read as 16-bit pairs puts zeros in every
// other column, off by >= 1.
void fill_probe_bias(float* bias, int n, cudaStream_t s) {
  launch_map(size_t(n), s, [=] __device__(size_t j) { bias[j] = 1.0f + 0.25f * float(j % 7); });
}

unsigned count_after_drain(const unsigned* count, cudaStream_t s) {
  unsigned far = 0;
  CUDA_CHECK(cudaMemcpyAsync(&far, count, sizeof far, cudaMemcpyDeviceToHost, s));
  CUDA_CHECK(cudaStreamSynchronize(s));
  return far;
}

namespace {

// Counts the elements where the epilogue's 16-bit output `got` is further from the fallback's
// `want` = round(acc + bias) than the rounding of `want` itself (|want| * 2^-mantissa bits)
// plus what another fp32 summation order can move acc (2^-8 * (|acc| + |bias|)): loose enough
// for a sum that nearly cancels, tight enough for a bias misread by about its own size.
void count_far_apart(const uint16_t* got, const uint16_t* want, const float* acc, const float* bias, int rows,
                     int cols, kern::HalfFormat f, unsigned* count, cudaStream_t s) {
  const float eps = f == kern::HalfFormat::kBf16 ? 0x1p-7f : 0x1p-10f;
  launch_map(size_t(rows) * cols, s, [=] __device__(size_t i) {
    const float x = kern::half_to_float(got[i], f), y = kern::half_to_float(want[i], f);
    const float b = bias[i % size_t(cols)];
    const float tol = eps * fabsf(y) + 0x1p-8f * (fabsf(acc[i]) + fabsf(b));
    if (!(fabsf(x - y) <= tol) && !(x != x && y != y)) atomicAdd(count, 1u);  // NaN only matches NaN
  });
}

}  // namespace

bool CudaOps::half_bias_epilogue_agrees(const LtBiasMatmul::Call& call, float* c) {
  if (half_bias_epilogue_ != Checked::kNotYet) return half_bias_epilogue_ == Checked::kAgrees;
  const int m = call.m, n = call.n, k = call.k;
  const size_t elems = size_t(m) * n;
  const kern::HalfFormat f = gemm_half_format(options_.math);
  // c null (gemm_bias_kept, whose c may be addresses only): the fp32 accumulator goes into the
  // scratch too, at its start.
  const size_t acc_bytes = c ? 0 : elems * sizeof(float);
  DeviceBytes scratch(acc_bytes + 3 * elems * sizeof(uint16_t) + n * sizeof(float) + sizeof(unsigned));
  if (!c) c = static_cast<float*>(scratch.get());
  uint16_t* want = reinterpret_cast<uint16_t*>(static_cast<char*>(scratch.get()) + acc_bytes);
  uint16_t* probe_got = want + elems;
  uint16_t* probe_want = probe_got + elems;
  float* probe_bias = reinterpret_cast<float*>(probe_want + elems);
  unsigned* count = reinterpret_cast<unsigned*>(probe_bias + n);
  fill_probe_bias(probe_bias, n, stream());
  LtBiasMatmul::Call probe = call;
  probe.bias = probe_bias;
  probe.c = probe_got;
  const bool probed = lt_.run(probe, stream());
  // The fallback: the fp32 accumulator in c, then each bias added and rounded once.
  gemm_ex(call.ta, call.tb, m, n, k, 1.0f, call.a, call.a_type, call.lda, call.b, call.b_type, call.ldb, 0.0f, c,
          CUDA_R_32F, call.ldc);
  bias_add_into_copy(c, call.bias, want, m, n, f, stream());
  bias_add_into_copy(c, probe_bias, probe_want, m, n, f, stream());
  CUDA_CHECK(cudaMemsetAsync(count, 0, sizeof(unsigned), stream()));
  count_far_apart(static_cast<const uint16_t*>(call.c), want, c, call.bias, m, n, f, count, stream());
  if (probed) count_far_apart(probe_got, probe_want, c, probe_bias, m, n, f, count, stream());
  const unsigned far = count_after_drain(count, stream());  // scratch is freed on return
  const bool agrees = probed && far == 0;
  if (agrees)
    std::fprintf(stderr, "lansbert: cuBLASLt: 16-bit GEMM output with an fp32 bias checked (%dx%dx%d, with a "
                 "probe bias too): epilogue used\n", m, n, k);
  else
    std::fprintf(stderr, "lansbert: cuBLASLt: 16-bit GEMM output with an fp32 bias %s (%dx%dx%d, %u elements "
                 "apart): epilogue not used for 16-bit outputs\n",
                 probed ? "disagrees with the fallback" : "refused for the probe bias", m, n, k, far);
  half_bias_epilogue_ = agrees ? Checked::kAgrees : Checked::kDisagrees;
  return agrees;
}

}  // namespace lansbert::cuda
