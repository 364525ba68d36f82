// The one-time check behind gemm_bias_kept's epilogue path: cuBLASLt is asked for a 16-bit D
// with an fp32 bias, which cublasLt.h does not document (it describes a bias of D's type). A
// library that accepted the attribute but read the bias as 16-bit values would be silently
// wrong, so the first call cuBLASLt accepts is checked against the fallback's computation (fp32
// GEMM, then bias + rounding in one kernel), twice: with the call's own bias, and with a probe
// bias of non-zero values (BERT initialises biases to zero, and zeros read as 16-bit pairs are
// still zeros, so the real call alone could not tell). Every row of the real call is checked,
// kCheckRows at a time; the probe runs on the first kCheckRows. One synchronisation, once; the
// answer decides the epilogue for 16-bit outputs in this CudaOps.
#include <algorithm>
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

const void* gemm_operand_row(const void* a, cudaDataType_t type, Trans ta, int lda, int r) {
  const size_t bytes = type == CUDA_R_32F ? 4 : 2;
  const size_t elements = ta == Trans::kNo ? size_t(r) * size_t(lda) : size_t(r);
  return static_cast<const char*>(a) + elements * bytes;
}

void column_scale(const float* acc, int rows, int cols, float* scale, cudaStream_t s) {
  launch_map(size_t(cols), s, [=] __device__(size_t c) {
    float sum = 0;
    for (int r = 0; r < rows; ++r) sum += fabsf(acc[size_t(r) * cols + c]);
    scale[c] = sum / float(rows);
  });
}

namespace {

// Counts the elements where the epilogue's 16-bit output `got` is further from the fallback's
// `want` = round(acc + bias) than the rounding of `want` itself (|want| * 2^-mantissa bits)
// plus what another fp32 summation order can move acc (2^-8 of |acc| + |bias| + the column's
// mean |acc|): loose enough for a sum that nearly cancels, tight enough for a bias misread by
// about its own size.
void count_far_apart(const uint16_t* got, const uint16_t* want, const float* acc, const float* bias,
                     const float* scale, int rows, int cols, kern::HalfFormat f, unsigned* count, cudaStream_t s) {
  const float eps = f == kern::HalfFormat::kBf16 ? 0x1p-7f : 0x1p-10f;
  launch_map(size_t(rows) * cols, s, [=] __device__(size_t i) {
    const float x = kern::half_to_float(got[i], f), y = kern::half_to_float(want[i], f);
    const size_t c = i % size_t(cols);
    const float tol = eps * fabsf(y) + 0x1p-8f * (fabsf(acc[i]) + fabsf(bias[c]) + scale[c]);
    if (!(fabsf(x - y) <= tol) && !(x != x && y != y)) atomicAdd(count, 1u);  // NaN only matches NaN
  });
}

}  // namespace

bool CudaOps::half_bias_epilogue_agrees(const LtBiasMatmul::Call& call) {
  if (half_bias_epilogue_ != Checked::kNotYet) return half_bias_epilogue_ == Checked::kAgrees;
  const int m = call.m, n = call.n, k = call.k, chunk = std::min(m, kCheckRows);
  const size_t elems = size_t(chunk) * n;
  const kern::HalfFormat f = gemm_half_format(options_.math);
  // The count, in 256 bytes of its own (first: the 16-bit arrays below may end off a 4-byte
  // boundary, and the accumulator after it keeps cudaMalloc's alignment for cuBLAS); per chunk
  // of rows the fp32 accumulator, its column scale and 16-bit fallback result; the probe bias,
  // the probe call's result and its fallback (its first chunk only).
  constexpr size_t kCountBytes = 256;
  DeviceBytes scratch(kCountBytes + elems * sizeof(float) + 2 * n * sizeof(float) + 3 * elems * sizeof(uint16_t));
  unsigned* count = static_cast<unsigned*>(scratch.get());
  float* acc = reinterpret_cast<float*>(static_cast<char*>(scratch.get()) + kCountBytes);
  float* scale = acc + elems;
  float* probe_bias = scale + n;
  uint16_t* want = reinterpret_cast<uint16_t*>(probe_bias + n);
  uint16_t* probe_got = want + elems;
  uint16_t* probe_want = probe_got + elems;
  fill_probe_bias(probe_bias, n, stream());
  LtBiasMatmul::Call probe = call;
  probe.m = chunk;
  probe.bias = probe_bias;
  probe.c = probe_got;
  const bool probed = lt_.run(probe, stream());
  CUDA_CHECK(cudaMemsetAsync(count, 0, sizeof(unsigned), stream()));
  const auto* got = static_cast<const uint16_t*>(call.c);
  for (int r0 = 0; r0 < m; r0 += chunk) {
    const int rows = std::min(chunk, m - r0);
    // The fallback: the fp32 accumulator of these rows, then each bias added and rounded once.
    gemm_ex(call.ta, call.tb, rows, n, k, 1.0f, gemm_operand_row(call.a, call.a_type, call.ta, call.lda, r0),
            call.a_type, call.lda, call.b, call.b_type, call.ldb, 0.0f, acc, CUDA_R_32F, n);
    column_scale(acc, rows, n, scale, stream());
    bias_add_into_copy(acc, call.bias, want, rows, n, f, stream());
    count_far_apart(got + size_t(r0) * call.ldc, want, acc, call.bias, scale, rows, n, f, count, stream());
    if (r0 == 0 && probed) {
      bias_add_into_copy(acc, probe_bias, probe_want, rows, n, f, stream());
      count_far_apart(probe_got, probe_want, acc, probe_bias, scale, rows, n, f, count, stream());
    }
  }
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
