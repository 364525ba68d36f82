// GEMMs on the CPU through OpenBLAS's CBLAS interface (row-major). Batched GEMMs loop over
// the two-level batch; each call may use OpenBLAS's own threads. In bf16/fp16 mode the
// operands are first rounded (shared bodies of kernels/half.h) into scratch copies, which is
// what the GPU's cast-then-tensor-core GEMM computes, up to the order of the fp32 sums.
#include <cblas.h>

#include <type_traits>

#include "cpu_ops_impl.h"
#include "lansbert/core/check.h"
#include "lansbert/kernels/half.h"

namespace lansbert::cpu {

namespace {
CBLAS_TRANSPOSE to_cblas(Trans t) { return t == Trans::kYes ? CblasTrans : CblasNoTrans; }

void blas_gemm(Trans ta, Trans tb, int m, int n, int k, float alpha, const float* a, int lda,
               const float* b, int ldb, float beta, float* c, int ldc) {
  cblas_sgemm(CblasRowMajor, to_cblas(ta), to_cblas(tb), m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
}
void blas_gemm(Trans ta, Trans tb, int m, int n, int k, double alpha, const double* a, int lda,
               const double* b, int ldb, double beta, double* c, int ldc) {
  cblas_dgemm(CblasRowMajor, to_cblas(ta), to_cblas(tb), m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
}
}  // namespace

template <typename T>
CpuOps<T>::CpuOps(GemmMath math, bool reuse_casts, AttentionMode attention)
    : math_(math), attention_(attention), reuse_casts_(reuse_casts) {
  LB_CHECK_MSG(attention == AttentionMode::kNative || attention == AttentionMode::kFlash,
               "the CPU backend has the hand-written and the flash attention only");
  LB_CHECK_MSG(math == GemmMath::kFp32 || (std::is_same_v<T, float> && math != GemmMath::kTf32),
               "the CPU backend emulates bf16 and fp16 GEMMs in float only (no TF32)");
}

template <typename T>
void CpuOps<T>::round_values(const T* x, size_t n, T* out) const {
  kern::with_half_format(gemm_half_format(math_), [&](auto F) {
#pragma omp parallel for schedule(static) if (worth_threads(n))
    for (size_t i = 0; i < n; ++i)
      out[i] = static_cast<T>(kern::round_to_half(static_cast<float>(x[i]), F));
  });
}

template <typename T>
void CpuOps<T>::widen_half(const uint16_t* x, size_t n, T* out) const {
  kern::with_half_format(gemm_half_format(math_), [&](auto F) {
#pragma omp parallel for schedule(static) if (worth_threads(n))
    for (size_t i = 0; i < n; ++i) out[i] = static_cast<T>(kern::half_to_float(x[i], F));
  });
}

template <typename T>
void CpuOps<T>::round_into(const T* x, size_t n, T* out) {
  round_values(x, n, out);
  conversions_ += n;
}

template <typename T>
std::vector<T>& CpuOps<T>::sized_copy(const T* x, size_t n) {
  std::vector<T>& copy = kept_.keep(x, n);
  if (copy.size() < n) copy.resize(n);
  return copy;
}

template <typename T>
std::vector<T>* CpuOps<T>::kept_output(const T* x, size_t n) {
  if (!kept_outputs_unwritten() || n == 0) return nullptr;
  copy_writes_ += n;
  return &sized_copy(x, n);
}

template <typename T>
void CpuOps<T>::keep_as_written(const T* y, size_t n) {
  if (std::vector<T>* copy = kept_output(y, n))
    round_values(y, n, copy->data());
  else
    keep_gemm_operand(y, n);
}

template <typename T>
void CpuOps<T>::layernorm_forward_kept(const T* x, const T* gamma, const T* beta, T* y, T* mean, T* rstd, int rows,
                                       int cols, T eps) {
  layernorm_forward(x, gamma, beta, y, mean, rstd, rows, cols, eps);
  keep_as_written(y, size_t(rows) * cols);
}

// Only GEMMs read dx after this (ops.h): where outputs are unwritten the dropped-out gradient
// goes into the copy's store, its bias sums are taken from those fp32 values, then it is
// rounded there, as the CUDA kernel writes only the copy.
template <typename T>
void CpuOps<T>::dropout_bias_backward_kept(const T* dy, T* dx, T* dbias, int rows, int cols, float p, RngKey key) {
  const size_t n = size_t(rows) * cols;
  std::vector<T>* copy = kept_output(dx, n);
  if (!copy) return Ops<T>::dropout_bias_backward_kept(dy, dx, dbias, rows, cols, p, key);
  dropout_bias_backward(dy, copy->data(), dbias, rows, cols, p, key);
  round_values(copy->data(), n, copy->data());
}

template <typename T>
void CpuOps<T>::bias_gelu_backward_kept(const T* dact, const T* pre, T* dpre, T* dbias, int rows, int cols) {
  const size_t n = size_t(rows) * cols;
  std::vector<T>* copy = kept_output(dpre, n);
  if (!copy) return Ops<T>::bias_gelu_backward_kept(dact, pre, dpre, dbias, rows, cols);
  // The fp32 gradient (and its bias sums) go into the copy's store, rounded there: dpre is
  // left unwritten, as the CUDA kernel leaves it (ops.h).
  bias_gelu_backward(dact, pre, copy->data(), dbias, rows, cols);
  round_values(copy->data(), n, copy->data());
}

template <typename T>
void CpuOps<T>::bias_add_backward_kept(const T* dy, T* dbias, int rows, int cols) {
  bias_add_backward(dy, dbias, rows, cols);
  keep_as_written(dy, size_t(rows) * cols);
}

template <typename T>
void CpuOps<T>::dropout_forward_kept(const T* x, T* y, size_t n, float p, RngKey key) {
  dropout_forward(x, y, n, p, key);
  keep_as_written(y, n);
}

template <typename T>
const T* CpuOps<T>::operand(const T* x, size_t n, std::vector<T>& scratch) {
  if (math_ == GemmMath::kFp32 || n == 0) return x;
  size_t offset = 0;
  if (const std::vector<T>* kept = kept_.find(x, n, &offset)) return kept->data() + offset;
  if (scratch.size() < n) scratch.resize(n);
  round_into(x, n, scratch.data());
  return scratch.data();
}

// Spans are tracked in every mode, so that an overlapping keep is caught in fp32 tests too.
template <typename T>
void CpuOps<T>::keep_gemm_operand(const T* x, size_t n) {
  if (!reuse_casts_ || n == 0) return;
  if (math_ == GemmMath::kFp32) {
    kept_.keep(x, n);
    return;
  }
  round_into(x, n, sized_copy(x, n).data());
}

// The twin of CudaOps reading the copy in place: the emulation's store holds the operand
// values as T, so the copy is widened into it (exact, and not a conversion the GPU makes).
template <typename T>
void CpuOps<T>::keep_converted_gemm_operand(const T* x, size_t n, const uint16_t* converted,
                                            kern::HalfFormat format) {
  if (!is_half_gemm(math_) || gemm_half_format(math_) != format) return keep_gemm_operand(x, n);
  if (!reuse_casts_ || n == 0) return;
  widen_half(converted, n, sized_copy(x, n).data());
}

template <typename T>
void CpuOps<T>::drop_gemm_operand(const T* x) {
  kept_.drop(x);
  kept_.take_unused();  // host memory: freed right away
}

template <typename T>
void CpuOps<T>::gemm(Trans ta, Trans tb, int m, int n, int k, T alpha, const T* a, int lda,
                     const T* b, int ldb, T beta, T* c, int ldc) {
  if (m <= 0 || n <= 0) return;
  a = operand(a, gemm_operand_extent(ta, m, k, lda), operand_a_);
  b = operand(b, gemm_operand_extent(tb, k, n, ldb), operand_b_);
  blas_gemm(ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
}

template <typename T>
void CpuOps<T>::gemm_batched(Trans ta, Trans tb, int m, int n, int k, T alpha, const T* a,
                             int lda, const T* b, int ldb, T beta, T* c, int ldc,
                             const GemmBatch& g) {
  // Attention GEMMs are many and small (S x S x D per head): one per thread beats splitting
  // each one. Inside the parallel region the OpenMP build of OpenBLAS runs single-threaded.
  const int count = g.outer * g.inner;
  if (m <= 0 || n <= 0 || count <= 0) return;
  a = operand(a, gemm_operand_extent(ta, m, k, lda, g.outer, g.a_outer, g.inner, g.a_inner), operand_a_);
  b = operand(b, gemm_operand_extent(tb, k, n, ldb, g.outer, g.b_outer, g.inner, g.b_inner), operand_b_);
#pragma omp parallel for schedule(static) if (count > 1 && worth_threads(size_t(count) * m * n * k))
  for (int j = 0; j < count; ++j) {
    const int o = j / g.inner, i = j % g.inner;
    blas_gemm(ta, tb, m, n, k, alpha, a + o * g.a_outer + i * g.a_inner, lda,
              b + o * g.b_outer + i * g.b_inner, ldb, beta, c + o * g.c_outer + i * g.c_inner, ldc);
  }
}

template <typename T>
template <typename Gemm>
bool CpuOps<T>::gemm_into_kept_copy(const T* c, size_t span, Gemm&& run) {
  std::vector<T>* copy = kept_output(c, span);
  if (!copy) return false;
  if (kept_result_.size() < span) kept_result_.resize(span);
  run(kept_result_.data());
  round_values(kept_result_.data(), span, copy->data());
  return true;
}

template <typename T>
void CpuOps<T>::gemm_accumulate_kept(Trans ta, Trans tb, int m, int n, int k, const T* a, int lda, const T* b,
                                     int ldb, T* c, int ldc) {
  LB_CHECK_MSG(kept_outputs_unwritten() && ldc == n,
               "gemm_accumulate_kept: needs kept 16-bit outputs (Ops::kept_outputs_unwritten) and ldc == n");
  if (m <= 0 || n <= 0) return;
  const size_t span = size_t(m) * n;
  size_t offset = 0;
  LB_CHECK_MSG(kept_.find(c, span, &offset) && offset == 0,
               "gemm_accumulate_kept: C is not kept (its copy holds what the product is added to)");
  T* copy = sized_copy(c, span).data();  // kept again: its contents change
  gemm(ta, tb, m, n, k, T(1), a, lda, b, ldb, T(1), copy, n);
  round_values(copy, span, copy);
}

template <typename T>
void CpuOps<T>::gemm_kept(Trans ta, Trans tb, int m, int n, int k, const T* a, int lda, const T* b, int ldb, T* c,
                          int ldc) {
  const size_t span = gemm_operand_extent(Trans::kNo, m, n, ldc);
  if (!gemm_into_kept_copy(c, span, [&](T* out) { gemm(ta, tb, m, n, k, T(1), a, lda, b, ldb, T(0), out, ldc); }))
    Ops<T>::gemm_kept(ta, tb, m, n, k, a, lda, b, ldb, c, ldc);
}

template <typename T>
void CpuOps<T>::gemm_bias_kept(Trans ta, Trans tb, int m, int n, int k, const T* a, int lda, const T* b, int ldb,
                               const T* bias, T* c, int ldc) {
  const size_t span = gemm_operand_extent(Trans::kNo, m, n, ldc);
  if (!gemm_into_kept_copy(c, span, [&](T* out) { this->gemm_bias(ta, tb, m, n, k, a, lda, b, ldb, bias, out, ldc); }))
    Ops<T>::gemm_bias_kept(ta, tb, m, n, k, a, lda, b, ldb, bias, c, ldc);
}

template <typename T>
void CpuOps<T>::gemm_batched_kept(Trans ta, Trans tb, int m, int n, int k, const T* a, int lda, const T* b, int ldb,
                                  T* c, int ldc, const GemmBatch& g) {
  const size_t span = gemm_operand_extent(Trans::kNo, m, n, ldc, g.outer, g.c_outer, g.inner, g.c_inner);
  if (!gemm_into_kept_copy(
          c, span, [&](T* out) { gemm_batched(ta, tb, m, n, k, T(1), a, lda, b, ldb, T(0), out, ldc, g); }))
    Ops<T>::gemm_batched_kept(ta, tb, m, n, k, a, lda, b, ldb, c, ldc, g);
}

template class CpuOps<float>;
template class CpuOps<double>;

template <typename T>
std::unique_ptr<Ops<T>> make_ops(GemmMath math, bool reuse_casts, AttentionMode attention) {
  return std::make_unique<CpuOps<T>>(math, reuse_casts, attention);
}
template std::unique_ptr<Ops<float>> make_ops<float>(GemmMath, bool, AttentionMode);
template std::unique_ptr<Ops<double>> make_ops<double>(GemmMath, bool, AttentionMode);

}  // namespace lansbert::cpu
