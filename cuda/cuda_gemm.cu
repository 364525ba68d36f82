// GEMMs through cuBLAS, and the backend's construction. Row-major C = op(A) op(B) is computed
// as column-major C^T = op(B)^T op(A)^T, i.e. cuBLAS is called with the operands swapped and
// the same transpose flags. A two-level batch (attention: outer = sequence, inner = head, so
// heads are read in place) is one cublasGemmBatchedEx over device pointer arrays, or one
// strided-batched call when either level has a single entry.
// With GemmMath kBf16/kFp16 each operand's span is first cast to 16 bits with the shared
// half.h bodies (the CPU twin rounds with the same ones), then multiplied on tensor cores
// with fp32 accumulation into the fp32 output. A span kept with keep_gemm_operand (a
// backward's dY; the model's weights and the layers' GEMM inputs from forward to backward) is
// cast once for all the GEMMs that read it; other operands are cast at each use.
// With OpsOptions::cast_in_gemm the fp32 operands go to cuBLAS as they are, with compute type
// 32F_FAST_16BF/16F: cuBLAS rounds them inside the GEMM (no cast pass, no workspace).
// gemm_bias (a linear layer's forward) runs through cuBLASLt with the bias epilogue
// (lt_bias_matmul.h) on the same operands, or cublasGemmEx and the bias kernel where cuBLASLt
// has no algorithm for the call.
#include <memory>

#include "cuda_ops.cuh"
#include "lansbert/kernels/half.h"
#include "launch.cuh"

namespace lansbert::cuda {

namespace {
cublasOperation_t to_cublas(Trans t) {
  return t == Trans::kYes ? CUBLAS_OP_T : CUBLAS_OP_N;
}
}  // namespace

CudaOps::CudaOps(const OpsOptions& options) : options_(options), stream_(), blas_(stream_.get()) {
  // Default math: plain fp32 unless TF32 is asked for (CUBLAS_COMPUTE_32F never uses TF32
  // by itself; the compute type below selects it). 16-bit inputs use tensor cores anyway.
  // Reductions (split-K) in the fp32 accumulator, never in a 16-bit output's type: the *_kept
  // GEMMs write 16-bit outputs that must be the fp32 result rounded once.
  const int math = options_.math == GemmMath::kTf32 ? CUBLAS_TF32_TENSOR_OP_MATH : CUBLAS_DEFAULT_MATH;
  CUBLAS_CHECK(cublasSetMathMode(blas_.get(), cublasMath_t(math | CUBLAS_MATH_DISALLOW_REDUCED_PRECISION_REDUCTION)));
}

// (Not a CudaOps member: an extended __device__ lambda may not live in a private method.)
void cast_gemm_operand(const float* x, uint16_t* out, size_t n, kern::HalfFormat format, cudaStream_t s) {
  launch_map(n, s, [=] __device__(size_t i) { out[i] = kern::float_to_half(x[i], format); });
}

// copy[i] = c[i] + bias[column], rounded once: gemm_bias_kept's fallback (the CPU twin adds the
// bias to the fp32 GEMM result, then rounds).
void bias_add_into_copy(const float* c, const float* bias, uint16_t* copy, int rows, int cols,
                        kern::HalfFormat format, cudaStream_t s) {
  launch_map(size_t(rows) * cols, s, [=] __device__(size_t i) {
    copy[i] = kern::float_to_half(c[i] + bias[i % size_t(cols)], format);
  });
}

// arrays[0, count): A of batch entry j = o * inner + i; [count, 2 count): B; then C.
// (cuBLAS takes one void* type for all three arrays; A and B are only read.)
void fill_batch_pointers(void** arrays, const char* a, size_t a_size, const char* b, size_t b_size, char* c,
                         size_t c_size, const GemmBatch& g, cudaStream_t s) {
  const int inner = g.inner, count = g.outer * g.inner;
  launch_map(size_t(count), s, [=] __device__(size_t j) {
    const int64_t o = int64_t(j) / inner, i = int64_t(j) % inner;
    arrays[j] = const_cast<char*>(a + size_t(o * g.a_outer + i * g.a_inner) * a_size);
    arrays[count + j] = const_cast<char*>(b + size_t(o * g.b_outer + i * g.b_inner) * b_size);
    arrays[2 * size_t(count) + j] = c + size_t(o * g.c_outer + i * g.c_inner) * c_size;
  });
}

cublasComputeType_t CudaOps::compute_type() const {
  switch (options_.math) {
    case GemmMath::kTf32:
      return CUBLAS_COMPUTE_32F_FAST_TF32;
    // Only reached with cast_in_gemm: otherwise the operands are 16-bit already and plain
    // 32F (fp32 accumulation) is the tensor-core path.
    case GemmMath::kBf16:
      return options_.cast_in_gemm ? CUBLAS_COMPUTE_32F_FAST_16BF : CUBLAS_COMPUTE_32F;
    case GemmMath::kFp16:
      return options_.cast_in_gemm ? CUBLAS_COMPUTE_32F_FAST_16F : CUBLAS_COMPUTE_32F;
    case GemmMath::kFp32:
      break;
  }
  return CUBLAS_COMPUTE_32F;
}

bool CudaOps::converts_operands() const {
  return is_half_gemm(options_.math) && !options_.cast_in_gemm;
}

cudaDataType_t CudaOps::half_type() const {
  return options_.math == GemmMath::kBf16 ? CUDA_R_16BF : CUDA_R_16F;
}

const void* CudaOps::half_operand(const float* x, size_t n, DeviceBytes& ws, cudaDataType_t* type) {
  if (!converts_operands()) {
    *type = CUDA_R_32F;
    return x;
  }
  *type = half_type();
  size_t offset = 0;
  if (const KeptCopy* kept = kept_.find(x, n, &offset)) return kept->data() + offset;
  ws.reserve(n * sizeof(uint16_t));
  uint16_t* out = static_cast<uint16_t*>(ws.get());
  cast_gemm_operand(x, out, n, gemm_half_format(options_.math), stream());
  conversions_ += n;
  return out;
}

// x[0, n) kept with a copy of its own (not the caller's), sized for n elements.
uint16_t* CudaOps::owned_copy(const float* x, size_t n) {
  KeptCopy& copy = kept_.keep(x, n);
  copy.external = nullptr;
  copy.owned.reserve(n * sizeof(uint16_t));
  return static_cast<uint16_t*>(copy.owned.get());
}

const uint16_t* CudaOps::kept_copy_of(const float* x, size_t n) const {
  size_t offset = 0;
  const KeptCopy* copy = kept_.find(x, n, &offset);
  return copy ? copy->data() + offset : nullptr;
}

uint16_t* CudaOps::rewritable_copy(const float* x, size_t n) {
  size_t offset = 0;
  const KeptCopy* copy = kept_.find(x, n, &offset);
  if (!copy || offset != 0 || copy->external) return nullptr;
  return static_cast<uint16_t*>(copy->owned.get());
}

// The *_kept ops: the kernel writes the copy itself (counted as copy writes, not casts).
uint16_t* CudaOps::kept_output(const float* x, size_t n) {
  if (!keeps_copies() || n == 0) return nullptr;
  copy_writes_ += n;
  return owned_copy(x, n);
}

// Cast now, on the ops stream: every GEMM that reads the copy comes later on the same stream,
// and the next keep's cast of the same span after them, so a copy is never overwritten while
// in use.
void CudaOps::keep_gemm_operand(const float* x, size_t n) {
  if (!keeps_copies() || n == 0) return;
  cast_gemm_operand(x, owned_copy(x, n), n, gemm_half_format(options_.math), stream());
  conversions_ += n;
}

// The caller's copy is written by the optimizer on the legacy default stream, which is ordered
// after this (blocking) stream's GEMMs and before its later work: no copy is read while being
// written. A cast copy the span had (its first forward, before any update) is freed once.
void CudaOps::keep_converted_gemm_operand(const float* x, size_t n, const uint16_t* converted,
                                          kern::HalfFormat format) {
  if (!converts_operands() || gemm_half_format(options_.math) != format) return keep_gemm_operand(x, n);
  if (!keeps_copies() || n == 0) return;
  KeptCopy& copy = kept_.keep(x, n);
  copy.external = converted;
  copy.owned.release();
}

void CudaOps::drop_gemm_operand(const float* x) {
  kept_.drop(x);
  auto unused = kept_.take_unused();
  if (!unused.empty()) CUDA_CHECK(cudaStreamSynchronize(stream()));  // queued GEMMs may read them
}

void CudaOps::zero(float* p, size_t n) {
  if (n) CUDA_CHECK(cudaMemsetAsync(p, 0, n * sizeof(float), stream()));
}

void CudaOps::gemm_ex(Trans ta, Trans tb, int m, int n, int k, float alpha, const void* a, cudaDataType_t a_type,
                      int lda, const void* b, cudaDataType_t b_type, int ldb, float beta, void* c,
                      cudaDataType_t c_type, int ldc) {
  CUBLAS_CHECK(cublasGemmEx(blas_.get(), to_cublas(tb), to_cublas(ta), n, m, k, &alpha, b, b_type, ldb, a, a_type,
                            lda, &beta, c, c_type, ldc, compute_type(), CUBLAS_GEMM_DEFAULT));
}

void CudaOps::gemm(Trans ta, Trans tb, int m, int n, int k, float alpha, const float* a, int lda,
                   const float* b, int ldb, float beta, float* c, int ldc) {
  if (m <= 0 || n <= 0) return;
  cudaDataType_t ta_type, tb_type;
  const void* ha = half_operand(a, gemm_operand_extent(ta, m, k, lda), half_a_, &ta_type);
  const void* hb = half_operand(b, gemm_operand_extent(tb, k, n, ldb), half_b_, &tb_type);
  gemm_ex(ta, tb, m, n, k, alpha, ha, ta_type, lda, hb, tb_type, ldb, beta, c, CUDA_R_32F, ldc);
}

// The operands are converted (or found kept) once, then go to whichever path runs, so the
// fallback does not convert them again. With `copy` (gemm_bias_kept, gemm_bias_half) the
// epilogue writes the 16-bit copy; the fallback then computes the fp32 accumulator into c, or
// where c is null (gemm_bias_kept: c's span may be addresses only) into a scratch of its own,
// and rounds it + bias into the copy in one pass, the order the CPU twin computes in.
LtBiasMatmul::Call CudaOps::lt_call(Trans ta, Trans tb, int m, int n, int k, const float* a, int lda,
                                    const float* b, int ldb) {
  LtBiasMatmul::Call call;
  call.ta = ta;
  call.tb = tb;
  call.m = m;
  call.n = n;
  call.k = k;
  call.a = half_operand(a, gemm_operand_extent(ta, m, k, lda), half_a_, &call.a_type);
  call.lda = lda;
  call.b = half_operand(b, gemm_operand_extent(tb, k, n, ldb), half_b_, &call.b_type);
  call.ldb = ldb;
  call.compute = compute_type();
  return call;
}

void CudaOps::gemm_bias_into(Trans ta, Trans tb, int m, int n, int k, const float* a, int lda, const float* b,
                             int ldb, const float* bias, float* c, int ldc, uint16_t* copy) {
  LB_CHECK_MSG(ldc == n, "gemm_bias: C must be contiguous rows (ldc == n)");
  if (m <= 0 || n <= 0) return;
  LtBiasMatmul::Call call = lt_call(ta, tb, m, n, k, a, lda, b, ldb);
  call.bias = bias;
  call.c = copy ? static_cast<void*>(copy) : c;
  call.c_type = copy ? half_type() : CUDA_R_32F;
  call.ldc = ldc;
  // A 16-bit copy takes the epilogue only while its one-time check has not disagreed.
  const bool may_fuse = !copy || half_bias_epilogue_ != Checked::kDisagrees;
  if (may_fuse && lt_.run(call, stream()) &&
      (!copy || half_bias_epilogue_agrees(call))) {
    ++fused_bias_gemms_;
    return;
  }
  ++unfused_bias_gemms_;
  if (!c) {
    bias_fallback_.reserve(size_t(m) * n * sizeof(float));
    c = static_cast<float*>(bias_fallback_.get());
  }
  gemm_ex(ta, tb, m, n, k, 1.0f, call.a, call.a_type, lda, call.b, call.b_type, ldb, 0.0f, c, CUDA_R_32F, ldc);
  if (copy)
    bias_add_into_copy(c, bias, copy, m, n, gemm_half_format(options_.math), stream());
  else
    bias_add_forward(c, bias, m, n);
}

void CudaOps::gemm_bias(Trans ta, Trans tb, int m, int n, int k, const float* a, int lda, const float* b, int ldb,
                        const float* bias, float* c, int ldc) {
  gemm_bias_into(ta, tb, m, n, k, a, lda, b, ldb, bias, c, ldc, nullptr);
}

// The *_kept GEMMs write c's kept copy in the operands' 16-bit type: cuBLAS rounds its fp32
// accumulator (plus the fp32 bias) once, as casting the fp32 result would. c is neither
// written nor read: its span may be addresses only.
void CudaOps::gemm_kept(Trans ta, Trans tb, int m, int n, int k, const float* a, int lda, const float* b, int ldb,
                        float* c, int ldc) {
  if (!keeps_copies() || m <= 0 || n <= 0) return Ops<float>::gemm_kept(ta, tb, m, n, k, a, lda, b, ldb, c, ldc);
  cudaDataType_t ta_type, tb_type;
  const void* ha = half_operand(a, gemm_operand_extent(ta, m, k, lda), half_a_, &ta_type);
  const void* hb = half_operand(b, gemm_operand_extent(tb, k, n, ldb), half_b_, &tb_type);
  uint16_t* copy = kept_output(c, gemm_operand_extent(Trans::kNo, m, n, ldc));
  gemm_ex(ta, tb, m, n, k, 1.0f, ha, ta_type, lda, hb, tb_type, ldb, 0.0f, copy, half_type(), ldc);
}

// cuBLAS with a 16-bit C read and written (beta 1): C's copy plus the fp32 accumulator, rounded
// once, as the CPU twin rounds gemm (beta 1) into the copy's values.
void CudaOps::gemm_accumulate_kept(Trans ta, Trans tb, int m, int n, int k, const float* a, int lda,
                                   const float* b, int ldb, float* c, int ldc) {
  LB_CHECK_MSG(keeps_copies() && ldc == n,
               "gemm_accumulate_kept: needs kept 16-bit outputs (Ops::kept_outputs_unwritten) and ldc == n");
  if (m <= 0 || n <= 0) return;
  uint16_t* copy = rewritable_copy(c, size_t(m) * n);
  LB_CHECK_MSG(copy, "gemm_accumulate_kept: C is not kept (its copy holds what the product is added to)");
  cudaDataType_t ta_type, tb_type;
  const void* ha = half_operand(a, gemm_operand_extent(ta, m, k, lda), half_a_, &ta_type);
  const void* hb = half_operand(b, gemm_operand_extent(tb, k, n, ldb), half_b_, &tb_type);
  gemm_ex(ta, tb, m, n, k, 1.0f, ha, ta_type, lda, hb, tb_type, ldb, 1.0f, copy, half_type(), ldc);
}

void CudaOps::gemm_bias_kept(Trans ta, Trans tb, int m, int n, int k, const float* a, int lda, const float* b,
                             int ldb, const float* bias, float* c, int ldc) {
  if (!keeps_copies() || m <= 0 || n <= 0)
    return Ops<float>::gemm_bias_kept(ta, tb, m, n, k, a, lda, b, ldb, bias, c, ldc);
  gemm_bias_into(ta, tb, m, n, k, a, lda, b, ldb, bias, nullptr, ldc,
                 kept_output(c, gemm_operand_extent(Trans::kNo, m, n, ldc)));
}

void CudaOps::gemm_batched_kept(Trans ta, Trans tb, int m, int n, int k, const float* a, int lda, const float* b,
                                int ldb, float* c, int ldc, const GemmBatch& g) {
  if (!keeps_copies() || m <= 0 || n <= 0 || g.outer <= 0 || g.inner <= 0)
    return Ops<float>::gemm_batched_kept(ta, tb, m, n, k, a, lda, b, ldb, c, ldc, g);
  uint16_t* copy = kept_output(c, gemm_operand_extent(Trans::kNo, m, n, ldc, g.outer, g.c_outer, g.inner, g.c_inner));
  batched_ex(ta, tb, m, n, k, 1.0f, a, lda, b, ldb, 0.0f, copy, half_type(), ldc, g);
}

void CudaOps::gemm_batched(Trans ta, Trans tb, int m, int n, int k, float alpha, const float* a,
                           int lda, const float* b, int ldb, float beta, float* c, int ldc,
                           const GemmBatch& g) {
  batched_ex(ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, CUDA_R_32F, ldc, g);
}

void CudaOps::batched_ex(Trans ta, Trans tb, int m, int n, int k, float alpha, const float* a, int lda,
                         const float* b, int ldb, float beta, void* c, cudaDataType_t c_type, int ldc,
                         const GemmBatch& g) {
  if (m <= 0 || n <= 0 || g.outer <= 0 || g.inner <= 0) return;
  cudaDataType_t ta_type, tb_type;
  const void* ha = half_operand(a, gemm_operand_extent(ta, m, k, lda, g.outer, g.a_outer, g.inner, g.a_inner),
                                half_a_, &ta_type);
  const void* hb = half_operand(b, gemm_operand_extent(tb, k, n, ldb, g.outer, g.b_outer, g.inner, g.b_inner),
                                half_b_, &tb_type);
  // Offsets in elements of the operand's own type (4 or 2 bytes).
  const size_t a_size = ta_type == CUDA_R_32F ? 4 : 2, b_size = tb_type == CUDA_R_32F ? 4 : 2;
  const size_t c_size = c_type == CUDA_R_32F ? 4 : 2;
  const char* pa = static_cast<const char*>(ha);
  const char* pb = static_cast<const char*>(hb);
  if (g.outer == 1 || g.inner == 1) {  // one stride covers the batch: one strided call
    const bool in = g.outer == 1;
    CUBLAS_CHECK(cublasGemmStridedBatchedEx(
        blas_.get(), to_cublas(tb), to_cublas(ta), n, m, k, &alpha, pb, tb_type, ldb, in ? g.b_inner : g.b_outer,
        pa, ta_type, lda, in ? g.a_inner : g.a_outer, &beta, c, c_type, ldc, in ? g.c_inner : g.c_outer,
        in ? g.inner : g.outer, compute_type(), CUBLAS_GEMM_DEFAULT));
    return;
  }
  // Attention's (sequence, head) batch has two strides: one pointer-array call instead of
  // `outer` strided calls (at batch 64 and 24 layers that is thousands of ~1 us launches a
  // step). The arrays are built on the device by one small kernel on the same stream. cuBLAS
  // cannot see pointers in device arrays, and its tensor-core kernels want them 16-byte
  // aligned: a batch with a stride that breaks that (an odd sequence length's S*S blocks)
  // takes the strided calls, whose base and stride cuBLAS sees and picks a kernel for.
  auto aligned = [](const void* p, int64_t outer, int64_t inner, size_t size) {
    return reinterpret_cast<uintptr_t>(p) % 16 == 0 && (outer * size) % 16 == 0 && (inner * size) % 16 == 0;
  };
  if (!aligned(pa, g.a_outer, g.a_inner, a_size) || !aligned(pb, g.b_outer, g.b_inner, b_size) ||
      !aligned(c, g.c_outer, g.c_inner, c_size)) {
    char* pc = static_cast<char*>(c);
    for (int o = 0; o < g.outer; ++o)
      CUBLAS_CHECK(cublasGemmStridedBatchedEx(
          blas_.get(), to_cublas(tb), to_cublas(ta), n, m, k, &alpha, pb + o * g.b_outer * b_size, tb_type, ldb,
          g.b_inner, pa + o * g.a_outer * a_size, ta_type, lda, g.a_inner, &beta, pc + o * g.c_outer * c_size, c_type,
          ldc, g.c_inner, g.inner, compute_type(), CUBLAS_GEMM_DEFAULT));
    return;
  }
  const int count = g.outer * g.inner;
  batch_ptrs_.reserve(3 * size_t(count) * sizeof(void*));
  void** arrays = static_cast<void**>(batch_ptrs_.get());
  fill_batch_pointers(arrays, pa, a_size, pb, b_size, static_cast<char*>(c), c_size, g, stream());
  CUBLAS_CHECK(cublasGemmBatchedEx(blas_.get(), to_cublas(tb), to_cublas(ta), n, m, k, &alpha, arrays + count,
                                   tb_type, ldb, arrays, ta_type, lda, &beta,
                                   arrays + 2 * size_t(count), c_type, ldc,
                                   count, compute_type(), CUBLAS_GEMM_DEFAULT));
}

std::unique_ptr<Ops<float>> make_ops(const OpsOptions& options) {
  return std::make_unique<CudaOps>(options);
}

}  // namespace lansbert::cuda
