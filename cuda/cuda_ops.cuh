// CudaOps: the CUDA implementation of Ops<float>. One stream, one cuBLAS handle bound to it,
// and the grow-only workspaces the deterministic scatters need. The methods are defined by
// topic in the cuda_*.cu files beside this header, each a thin launcher around kernels that
// call the shared math bodies of include/lansbert/kernels (the CPU twin is src/cpu).
#pragma once

#include <cstdint>
#include <memory>

#include "cuda_api.h"
#include "cuda_raii.cuh"
#include "fused_attention.h"
#include "lansbert/backend/kept_operands.h"
#include "lansbert/backend/ops.h"
#include "lt_bias_matmul.h"

namespace lansbert::cuda {

// A kept span's 16-bit copy: cast by CudaOps into `owned` (keep_gemm_operand), or the
// caller's copy read in place (keep_converted_gemm_operand: the optimizer's weight copy).
struct KeptCopy {
  DeviceBytes owned;
  const uint16_t* external = nullptr;
  const uint16_t* data() const { return external ? external : static_cast<const uint16_t*>(owned.get()); }
};

// copy[i] = c[i] + bias[i % cols] rounded to `format` (cuda_gemm.cu): gemm_bias_kept's fallback
// and its check (half_bias_check.cu).
void bias_add_into_copy(const float* c, const float* bias, uint16_t* copy, int rows, int cols,
                        kern::HalfFormat format, cudaStream_t s);
// x[i] = h[i] widened, and out[i] = x[i] rounded to `format` (out may be x), for i < n
// (cuda_half_activations.cu): the 16-bit gradient stream's ends and the LayerNorm backward's
// two-op fallback.
void widen_half(const uint16_t* h, float* x, size_t n, kern::HalfFormat format, cudaStream_t s);
void round_half_into(const float* x, float* out, size_t n, kern::HalfFormat format, cudaStream_t s);
// bias[j] = 1.0, 1.25, ..., 2.5 repeating (half_bias_check.cu): the epilogue checks' probe bias.
void fill_probe_bias(float* bias, int n, cudaStream_t s);
// The epilogue checks' ending (half_bias_check.cu): the count of elements found apart, which
// their kernels added into *count, read after the stream drains (the check's one
// synchronisation; its scratch may be freed once this returns).
unsigned count_after_drain(const unsigned* count, cudaStream_t s);
// The epilogue checks recompute a call's result kCheckRows rows at a time, so their scratch
// stays near 1024 x n whatever m is (bert-large's FFN at 32K tokens a rank would otherwise
// need a GiB, in the middle of the first step); each probe call runs on at most that many rows.
inline constexpr int kCheckRows = 1024;
// op(A)'s row r of a row-major GEMM operand (ta: A stored [m, k], or [k, m] transposed).
const void* gemm_operand_row(const void* a, cudaDataType_t type, Trans ta, int lda, int r);
// scale[c] = the mean |acc[., c]| over `rows` rows of [rows, cols]: the size of a column's sums,
// the checks' floor for values that nearly cancel (another fp32 summation order moves those by
// a part of the summands' size, not of the small result).
void column_scale(const float* acc, int rows, int cols, float* scale, cudaStream_t s);

class CudaOps final : public Ops<float> {
 public:
  explicit CudaOps(const OpsOptions& options);

  Allocator& allocator() override { return device_allocator(); }
  void zero(float* p, size_t n) override;
  cudaStream_t stream() const { return stream_.get(); }

  void gemm(Trans ta, Trans tb, int m, int n, int k, float alpha, const float* a, int lda,
            const float* b, int ldb, float beta, float* c, int ldc) override;
  void gemm_batched(Trans ta, Trans tb, int m, int n, int k, float alpha, const float* a, int lda,
                    const float* b, int ldb, float beta, float* c, int ldc,
                    const GemmBatch& batch) override;
  // Through cuBLASLt's bias epilogue (lt_bias_matmul.h); gemm() then the bias kernel where
  // cuBLASLt has no algorithm for the call.
  void gemm_bias(Trans ta, Trans tb, int m, int n, int k, const float* a, int lda, const float* b, int ldb,
                 const float* bias, float* c, int ldc) override;
  // gemm_bias calls served by the epilogue and by the fallback (tests, profiles).
  size_t fused_bias_gemms() const { return fused_bias_gemms_; }
  size_t unfused_bias_gemms() const { return unfused_bias_gemms_; }
  // With 16-bit GEMMs and cast reuse: the GEMM's output type is the operands' 16-bit type and
  // it writes the kept copy of c directly (cuda_gemm.cu); c is left unwritten.
  void gemm_accumulate_kept(Trans ta, Trans tb, int m, int n, int k, const float* a, int lda, const float* b,
                            int ldb, float* c, int ldc) override;
  void gemm_kept(Trans ta, Trans tb, int m, int n, int k, const float* a, int lda, const float* b, int ldb,
                 float* c, int ldc) override;
  void gemm_bias_kept(Trans ta, Trans tb, int m, int n, int k, const float* a, int lda, const float* b, int ldb,
                      const float* bias, float* c, int ldc) override;
  void gemm_batched_kept(Trans ta, Trans tb, int m, int n, int k, const float* a, int lda, const float* b, int ldb,
                         float* c, int ldc, const GemmBatch& batch) override;
  // cuDNN's attention reads q, k, v, ctx and d(ctx) in fp32; the hand-written one reads them
  // only through GEMMs, the flash one through their kept 16-bit copies where copies are kept.
  bool attention_reads_only_gemm_operands() const override {
    return options_.attention == AttentionMode::kNative || (options_.attention == AttentionMode::kFlash && keeps_copies());
  }
  void keep_gemm_operand(const float* x, size_t n) override;
  void keep_converted_gemm_operand(const float* x, size_t n, const uint16_t* converted,
                                   kern::HalfFormat format) override;
  void drop_gemm_operand(const float* x) override;
  size_t gemm_operand_conversions() const override { return conversions_; }
  // Device memory of the kept copies (an external copy, the optimizer's weight copy, owns none).
  size_t kept_copy_bytes() const override {
    return kept_.held([](const KeptCopy& c) { return c.external ? size_t(0) : c.owned.bytes(); });
  }

  void bias_add_forward(float* y, const float* bias, int rows, int cols) override;
  void bias_add_backward(const float* dy, float* dbias, int rows, int cols) override;
  void add_forward(const float* a, const float* b, float* y, size_t n) override;
  void accumulate(float* dst, const float* src, size_t n) override;

  void layernorm_forward(const float* x, const float* gamma, const float* beta, float* y,
                         float* mean, float* rstd, int rows, int cols, float eps) override;
  // The residual pass and the LayerNorm in one kernel, a warp per row (cuda_layernorm.cu).
  void residual_layernorm_forward(const ResidualLayerNorm<float>& a) override;
  void residual_layernorm_backward(const ResidualLayerNormGrad<float>& g) override;
  void round_to_gemm_half(float* x, size_t n) override;
  void widen_kept(float* x, size_t n) override;
  void layernorm_backward(const float* dy, const float* x, const float* gamma, const float* mean,
                          const float* rstd, float* dx, float* dgamma, float* dbeta, int rows,
                          int cols) override;

  void bias_gelu_forward(float* pre, const float* bias, float* act, int rows, int cols) override;
  bool kept_outputs_unwritten() const override { return keeps_copies(); }
  void layernorm_forward_kept(const float* x, const float* gamma, const float* beta, float* y, float* mean,
                              float* rstd, int rows, int cols, float eps) override;
  void dropout_bias_backward_kept(const float* dy, float* dx, float* dbias, int rows, int cols, float p,
                                  RngKey key) override;
  void bias_gelu_backward_kept(const float* dact, const float* pre, float* dpre, float* dbias, int rows,
                               int cols) override;
  void bias_add_backward_kept(const float* dy, float* dbias, int rows, int cols) override;
  void dropout_forward_kept(const float* x, float* y, size_t n, float p, RngKey key) override;
  size_t gemm_operand_copy_writes() const override { return copy_writes_; }
  void bias_gelu_backward(const float* dact, const float* pre, float* dpre, float* dbias, int rows,
                          int cols) override;
  void bias_dropout_residual_forward(float* y, const float* bias, const float* residual, int rows, int cols,
                                     float p, RngKey key) override;
  void dropout_bias_backward(const float* dy, float* dx, float* dbias, int rows, int cols, float p,
                             RngKey key) override;

  void gelu_forward(const float* x, float* y, size_t n) override;
  void gelu_forward_kept(const float* x, float* y, size_t n) override;
  // cuda_half_activations.cu: 16-bit FFN activations, with bf16/fp16 GEMMs whose operands our
  // cast pass rounds (not gemm_cast cublas, whose GEMMs read fp32).
  bool half_activations() const override { return converts_operands(); }
  bool attention_keeps_input_gradients() const override {
    return options_.attention == AttentionMode::kFlash && converts_operands();
  }
  // flash_attention_check on the current device: what attention_forward decides per call.
  bool attention_runs_flash(int head_dim) const override;
  void bias_add_backward_of_kept(const float* dy, float* dbias, int rows, int cols) override;
  void gemm_bias_half(Trans ta, Trans tb, int m, int n, int k, const float* a, int lda, const float* b, int ldb,
                      const float* bias, float* scratch, uint16_t* out) override;
  void gelu_forward_half_kept(const uint16_t* x, float* y, size_t n) override;
  void bias_gelu_backward_half_kept(const float* dact, const uint16_t* pre, float* dpre, float* dbias, int rows,
                                    int cols) override;
  // For the tanh GELU: one GEMM each through cuBLASLt's GELU_AUX_BIAS / DGELU_BGRAD epilogues
  // (checked once against the unfused kernels, gelu_epilogue_check.cu); the erf form, and
  // calls cuBLASLt refuses, run the unfused ops (cuda_half_activations.cu).
  void gemm_bias_gelu_half(Trans ta, Trans tb, int m, int n, int k, const float* a, int lda, const float* b,
                           int ldb, const float* bias, float* scratch, uint16_t* pre, float* act) override;
  void gemm_dgelu_bias_half(Trans ta, Trans tb, int m, int n, int k, const float* a, int lda, const float* b,
                            int ldb, const uint16_t* pre, float* dpre, float* dbias) override;
  // Those two ops' calls served by the epilogues and by the unfused kernels (tests, profiles).
  size_t fused_gelu_gemms() const { return fused_gelu_gemms_; }
  size_t unfused_gelu_gemms() const { return unfused_gelu_gemms_; }
  void gelu_backward(const float* dy, const float* x, float* dx, size_t n) override;
  void tanh_forward(const float* x, float* y, size_t n) override;
  void tanh_backward(const float* dy, const float* y, float* dx, size_t n) override;
  void dropout_forward(const float* x, float* y, size_t n, float p, RngKey key) override;
  void dropout_backward(const float* dy, float* dx, size_t n, float p, RngKey key) override;

  void softmax_forward(const float* scores, const int32_t* key_mask, float* probs, int batch,
                       int heads, int seq, float scale) override;
  void softmax_backward(const float* dprobs, const float* probs, float* dscores, int batch,
                        int heads, int seq, float scale) override;
  void softmax_dropout_forward(const float* scores, const int32_t* key_mask, float* probs, float* probs_drop,
                               int batch, int heads, int seq, float scale, float p, RngKey key) override;
  void dropout_softmax_backward(float* dprobs_drop, const float* probs, float* dscores, int batch, int heads,
                                int seq, float scale, float p, RngKey key) override;
  void softmax_dropout_forward_kept(const float* scores, const int32_t* key_mask, float* probs, float* probs_drop,
                                    int batch, int heads, int seq, float scale, float p, RngKey key) override;
  void softmax_backward_kept(float* dprobs, const float* probs, float* dscores, int batch, int heads, int seq,
                             float scale, float p, RngKey key) override;

  void embedding_forward(const int32_t* ids, const float* table, float* out, int n, int dim,
                         bool accumulate) override;
  void embedding_backward(const int32_t* ids, const float* dout, float* dtable, int n,
                          int dim) override;
  void gather_rows_forward(const float* src, const int32_t* index, float* dst, int n,
                           int dim) override;
  void gather_rows_backward(const float* ddst, const int32_t* index, float* dsrc, int n,
                            int dim) override;

  void cross_entropy_forward(const float* logits, const int32_t* labels, float* losses,
                             int32_t* correct, int rows, int classes) override;
  void cross_entropy_backward(const float* logits, const int32_t* labels, float* dlogits, int rows,
                              int classes, float weight) override;

  // cuda_attention.cu: the flash or the fused (cuDNN) attention where options.attention asks
  // for it and it applies, the hand-written composition otherwise.
  AttentionImpl attention_forward(const AttentionForward<float>& a) override;
  void attention_backward(const AttentionBackward<float>& a) override;
  // The fused attention's state (created on first use; tests look at its fallback reason).
  FusedAttention& fused();
  // Why the last forward under attention flash ran the hand-written attention ("" if it ran
  // the flash kernels; logged when it changes).
  const std::string& flash_fallback() const { return flash_fallback_; }

 private:
  // With a 16-bit GemmMath: x[0, n) rounded to the operand format in `ws` (grown as
  // needed), on the ops stream, or a kept span's copy where x lies inside it; the cuBLAS
  // data type is returned in *type.
  const void* half_operand(const float* x, size_t n, DeviceBytes& ws, cudaDataType_t* type);
  bool converts_operands() const;  // 16-bit GemmMath with our cast pass (not cast_in_gemm)
  // ... and kept spans get 16-bit copies (OpsOptions::reuse_casts).
  bool keeps_copies() const { return converts_operands() && options_.reuse_casts; }
  // x[0, n) kept with a copy of its own, sized; its first element.
  uint16_t* owned_copy(const float* x, size_t n);
  // x[0, n) kept, with its 16-bit copy sized, for a kernel to write the copy directly (the
  // *_kept ops); null where operands are not converted or reuse is off.
  uint16_t* kept_output(const float* x, size_t n);
  // The 16-bit copy of x[0, n) where a kept span holds it (at x's offset), else null.
  const uint16_t* kept_copy_of(const float* x, size_t n) const;
  // The copy of the kept span that starts at x and holds n elements, where it is this CudaOps's
  // own (a producing op's), for an op to rewrite in place (residual_layernorm_forward's
  // sum_copy_only); else null.
  uint16_t* rewritable_copy(const float* x, size_t n);
  // cublasGemmEx on operands half_operand returned (row-major, swapped for column-major), into
  // c of type c_type (fp32, or the operands' 16-bit type for the *_kept GEMMs).
  void gemm_ex(Trans ta, Trans tb, int m, int n, int k, float alpha, const void* a, cudaDataType_t a_type, int lda,
               const void* b, cudaDataType_t b_type, int ldb, float beta, void* c, cudaDataType_t c_type, int ldc);
  // gemm_batched's body, into c of type c_type.
  void batched_ex(Trans ta, Trans tb, int m, int n, int k, float alpha, const float* a, int lda, const float* b,
                  int ldb, float beta, void* c, cudaDataType_t c_type, int ldc, const GemmBatch& g);
  // The operands' 16-bit cuBLAS type. REQUIRES: converts_operands().
  cudaDataType_t half_type() const;
  // gemm_bias, with its output written as `copy` (16-bit) when given (gemm_bias_kept, c null,
  // and gemm_bias_half, c its scratch).
  void gemm_bias_into(Trans ta, Trans tb, int m, int n, int k, const float* a, int lda, const float* b, int ldb,
                      const float* bias, float* c, int ldc, uint16_t* copy);
  // An LtBiasMatmul call for op(A) op(B) [m, n] with its operands converted (half_operand);
  // the caller sets the epilogue, bias, output and aux.
  LtBiasMatmul::Call lt_call(Trans ta, Trans tb, int m, int n, int k, const float* a, int lda, const float* b,
                             int ldb);
  // gelu_epilogue_check.cu: after cuBLASLt ran `call` (GELU_AUX_BIAS, or DGELU_BGRAD), whether
  // its outputs agree with the unfused computation from an fp32 GEMM of the same operands
  // (GELU_AUX_BIAS: with the call's bias and a non-zero probe bias); checked on the first call
  // of each, the answer kept in gelu_epilogue_ for the later ones.
  bool gelu_epilogue_agrees(const LtBiasMatmul::Call& call);
  // half_bias_check.cu: after cuBLASLt's epilogue ran `call` (16-bit D, fp32 bias), whether
  // the fallback's computation (in scratch of its own, kCheckRows rows at a time) agrees, with
  // the call's bias and with a non-zero probe bias; checked on the first call, the answer kept
  // in half_bias_epilogue_ for the later ones.
  bool half_bias_epilogue_agrees(const LtBiasMatmul::Call& call);
  cublasComputeType_t compute_type() const;

  // dst[index[i], :] += src[i, :], rows of one index summed in ascending i (cuda_gather.cu).
  void scatter_add_rows(const int32_t* index, const float* src, float* dst, int n, int dim);

  OpsOptions options_;
  Stream stream_;
  CublasHandle blas_;
  LtBiasMatmul lt_;                                  // gemm_bias's plans and cuBLASLt handle
  size_t fused_bias_gemms_ = 0, unfused_bias_gemms_ = 0;
  enum class Checked { kNotYet, kAgrees, kDisagrees };
  Checked half_bias_epilogue_ = Checked::kNotYet;  // the fp32-bias epilogue with a 16-bit D
  Checked gelu_epilogue_[2] = {Checked::kNotYet, Checked::kNotYet};  // GELU_AUX_BIAS, DGELU_BGRAD
  size_t fused_gelu_gemms_ = 0, unfused_gelu_gemms_ = 0;
  DeviceBytes bias_grad_;                            // DGELU_BGRAD's bias gradient, then added to dbias
  // scatter workspaces, grown on first use: the sort, and the pieces of rows that cross chunks
  DeviceBytes sort_keys_, sort_values_, sort_temp_, scatter_pieces_;
  DeviceBytes column_partials_;                      // bias/LayerNorm parameter-gradient sums
  DeviceBytes widened_sums_;                         // 16-bit LayerNorm sums widened for the unfused backward
  DeviceBytes widened_grads_;                        // its d(out), widened or rounded, likewise
  DeviceBytes bias_fallback_;                        // gemm_bias_kept's fp32 result where the epilogue is not used
  DeviceBytes half_a_, half_b_;                      // 16-bit GEMM operands
  KeptOperands<float, KeptCopy> kept_;               // keep_gemm_operand's 16-bit copies
  size_t conversions_ = 0;                           // elements cast for GEMMs
  size_t copy_writes_ = 0;                           // kept copies' elements written by producing ops
  DeviceBytes batch_ptrs_;                           // pointer arrays of gemm_batched
  std::unique_ptr<FusedAttention> fused_;            // only with attention cudnn/auto
  std::string flash_fallback_;                       // flash_fallback()
};

}  // namespace lansbert::cuda
