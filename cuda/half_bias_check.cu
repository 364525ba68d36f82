// The one-time check behind gemm_bias_kept's epilogue path: cuBLASLt is asked for a 16-bit D
// with an fp32 bias, which cublasLt.h does not document (it describes a bias of D's type). A
// library that accepted the attribute but read the bias as 16-bit values would be silently
// wrong, so the first call cuBLASLt accepts is also run the fallback's way (fp32 GEMM, then
// bias + rounding in one kernel) and the two copies are compared: more than one 16-bit ulp
// apart anywhere (more than a different summation order can move a rounding) switches the
// epilogue off for 16-bit outputs in this CudaOps. One synchronisation, once.
#include <cstdio>

#include "cuda_ops.cuh"
#include "launch.cuh"

namespace lansbert::cuda {

// Counts the elements where a and b, 16-bit patterns of the same format, differ by more than
// one ulp (adjacent patterns of one sign are one ulp apart; a sign change counts).
void count_far_apart(const uint16_t* a, const uint16_t* b, size_t n, unsigned* count, cudaStream_t s) {
  launch_map(n, s, [=] __device__(size_t i) {
    const int d = int(a[i]) - int(b[i]);
    const bool same_sign = ((a[i] ^ b[i]) & 0x8000u) == 0;
    if (!same_sign || d > 1 || d < -1) atomicAdd(count, 1u);
  });
}

bool CudaOps::half_bias_epilogue_agrees(Trans ta, Trans tb, int m, int n, int k, const void* ha,
                                        cudaDataType_t ta_type, int lda, const void* hb, cudaDataType_t tb_type,
                                        int ldb, const float* bias, float* c, int ldc, const uint16_t* copy) {
  if (half_bias_epilogue_ != Checked::kNotYet) return half_bias_epilogue_ == Checked::kAgrees;
  const size_t elems = size_t(m) * n;
  DeviceBytes reference(elems * sizeof(uint16_t)), counter(sizeof(unsigned));
  uint16_t* ref = static_cast<uint16_t*>(reference.get());
  unsigned* count = static_cast<unsigned*>(counter.get());
  gemm_ex(ta, tb, m, n, k, 1.0f, ha, ta_type, lda, hb, tb_type, ldb, 0.0f, c, CUDA_R_32F, ldc);
  bias_add_into_copy(c, bias, ref, m, n, gemm_half_format(options_.math), stream());
  CUDA_CHECK(cudaMemsetAsync(count, 0, sizeof(unsigned), stream()));
  count_far_apart(copy, ref, elems, count, stream());
  unsigned far = 0;
  CUDA_CHECK(cudaMemcpyAsync(&far, count, sizeof far, cudaMemcpyDeviceToHost, stream()));
  CUDA_CHECK(cudaStreamSynchronize(stream()));
  std::fprintf(stderr,
               far == 0 ? "lansbert: cuBLASLt: 16-bit GEMM output with an fp32 bias checked (%dx%dx%d): epilogue used\n"
                        : "lansbert: cuBLASLt: 16-bit GEMM output with an fp32 bias disagrees with the fallback "
                          "(%dx%dx%d, %u elements): epilogue not used for 16-bit outputs\n",
               m, n, k, far);
  half_bias_epilogue_ = far == 0 ? Checked::kAgrees : Checked::kDisagrees;
  return far == 0;
}

}  // namespace lansbert::cuda
