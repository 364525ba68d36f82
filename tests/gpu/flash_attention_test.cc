// The flash attention's CUDA kernels (cuda/flash_attention.cu) against their CPU twin
// (src/cpu/cpu_flash_attention.cc) on the same inputs and the same 16-bit format: ctx and
// d(q, k, v) agree to accumulation order (the twin sums in fp32 in another order, so a 16-bit
// rounding of a probability or of d(scores) may land on the other side), with padding, a
// partial last tile and dropout (a different mask would be far off). Against the CUDA
// hand-written attention at the same precision they differ by the bf16 error both have.
// Calls the kernels do not take (fp32 GEMMs, another head size) run the hand-written one.
// Skipped without a device; printed: the max relative errors.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>

#include "../model/model_test_util.h"
#include "attention_run.h"
#include "fd.h"
#include "cuda_ops.cuh"
#include "gpu_test_util.h"
#include "lansbert/backend/cpu_ops.h"
#include "lansbert/model/bert_model.h"

namespace lansbert {
namespace {

using testing::AttentionCase;
using testing::rel_max_diff;
using testing::run_attention;

std::unique_ptr<cuda::CudaOps> cuda_ops(GemmMath math, AttentionMode mode) {
  cuda::OpsOptions o;
  o.math = math;
  o.attention = mode;
  return std::make_unique<cuda::CudaOps>(o);
}

void expect_matches_twin(const AttentionCase<float>& c, GemmMath math, double tol) {
  auto gpu = cuda_ops(math, AttentionMode::kFlash);
  auto twin = cpu::make_ops<float>(math, true, AttentionMode::kFlash);
  const auto g = run_attention(*gpu, c), t = run_attention(*twin, c);
  ASSERT_EQ(g.impl, AttentionImpl::kFlash) << gpu->flash_fallback();
  const double ctx = rel_max_diff(g.ctx, t.ctx), grad = rel_max_diff(g.d_qkv, t.d_qkv);
  std::printf("flash %s, B %d A %d S %d, dropout %.2f: ctx rel %.2e, d(qkv) rel %.2e vs the CPU twin\n",
              gemm_math_name(math), c.shape.batch, c.shape.heads, c.shape.seq, c.dropout, ctx, grad);
  EXPECT_LT(ctx, tol);
  EXPECT_LT(grad, tol);
  // The saved log-sum-exp of every row with a key (the others are +inf on both).
  EXPECT_LT(rel_max_diff(g.stats, t.stats), 1e-5);
}

TEST(GpuFlashAttention, MatchesItsCpuTwin) {
  LB_REQUIRE_GPU();
  // (Measured on the emulator: at most 7e-4.)
  for (float p : {0.0f, 0.5f}) {
    SCOPED_TRACE("dropout " + std::to_string(p));
    expect_matches_twin(AttentionCase<float>(2, 2, 96, 64, {96, 50}, p, 21), GemmMath::kBf16, 5e-3);
    // Three query tiles, the last one partial; a sequence without any unmasked key.
    expect_matches_twin(AttentionCase<float>(2, 1, 130, 64, {130, 0}, p, 22), GemmMath::kBf16, 5e-3);
  }
  expect_matches_twin(AttentionCase<float>(2, 2, 96, 64, {96, 50}, 0.1f, 23), GemmMath::kFp16, 5e-3);
}

// Packed rows (data/packing.h): the mask numbers each row's sequences, which end inside the
// tiles of 64 queries and 32 keys; a query sees only its own sequence (kern::attention_visible).
TEST(GpuFlashAttention, PackedRowsMatchTheCpuTwin) {
  LB_REQUIRE_GPU();
  for (float p : {0.0f, 0.3f}) {
    SCOPED_TRACE("dropout " + std::to_string(p));
    AttentionCase<float> c(2, 2, 130, 64, {130}, p, 25);
    testing::pack_sequences(c, 0, {40, 50, 30});
    testing::pack_sequences(c, 1, {70, 3, 33, 24});
    expect_matches_twin(c, GemmMath::kBf16, 5e-3);
  }
}

// AttentionBackward::d_qkv_kept on the device: the kernels write d(q, k, v) into their kept
// copies, the bits of rounding the same call's fp32 output (the same accumulators), nothing
// cast; and within the twin's tolerance of the CPU twin doing the same.
TEST(GpuFlashAttention, KeptInputGradientsAreTheRoundedFp32) {
  LB_REQUIRE_GPU();
  for (GemmMath math : {GemmMath::kBf16, GemmMath::kFp16}) {
    SCOPED_TRACE(gemm_math_name(math));
    const kern::HalfFormat f = gemm_half_format(math);
    AttentionCase<float> c(2, 2, 96, 64, {96, 50}, 0.1f, 24);
    c.kept_io = true;
    auto plain = cuda_ops(math, AttentionMode::kFlash), kept = cuda_ops(math, AttentionMode::kFlash);
    auto twin = cpu::make_ops<float>(math, true, AttentionMode::kFlash);
    ASSERT_TRUE(kept->attention_keeps_input_gradients());
    const auto ref = run_attention(*plain, c);
    c.d_qkv_kept = true;
    const auto got = run_attention(*kept, c), t = run_attention(*twin, c);
    ASSERT_EQ(got.impl, AttentionImpl::kFlash) << kept->flash_fallback();
    std::vector<float> want(ref.d_qkv.size());
    for (size_t i = 0; i < want.size(); ++i) want[i] = kern::round_to_half(ref.d_qkv[i], f);
    EXPECT_EQ(got.d_qkv, want);
    // (the kept run also casts the identity it reads them with, (3H)^2)
    EXPECT_EQ(kept->gemm_operand_copy_writes() - plain->gemm_operand_copy_writes(), want.size());
    EXPECT_EQ(kept->gemm_operand_conversions() - plain->gemm_operand_conversions(),
              size_t(3 * c.shape.ld) * (3 * c.shape.ld));
    const double grad = rel_max_diff(got.d_qkv, t.d_qkv);
    std::printf("flash %s, d(qkv) kept: rel %.2e vs the CPU twin\n", gemm_math_name(math), grad);
    EXPECT_LT(grad, 5e-3);
  }
}

TEST(GpuFlashAttention, TracksTheHandWrittenAttention) {
  LB_REQUIRE_GPU();
  const AttentionCase<float> c(2, 4, 64, 64, {64, 40}, 0.1f, 23);
  auto flash = cuda_ops(GemmMath::kBf16, AttentionMode::kFlash), native = cuda_ops(GemmMath::kBf16, AttentionMode::kNative);
  const auto f = run_attention(*flash, c), n = run_attention(*native, c);
  ASSERT_EQ(f.impl, AttentionImpl::kFlash);
  ASSERT_EQ(n.impl, AttentionImpl::kNative);
  EXPECT_LT(rel_max_diff(f.ctx, n.ctx), 2e-2);
  EXPECT_LT(rel_max_diff(f.d_qkv, n.d_qkv), 5e-2);
}

// AttentionBackward::d_qkv_bias on the device: the kernels' per-tile partials and their finish
// give the column sums of the d(q, k, v) copies they wrote (one tile and a tail per sequence,
// masked rows included), added to what the bias held; and the CPU twin's sums of its own copies.
TEST(GpuFlashAttention, QkvBiasSumsAreTheColumnSumsOfTheWrittenCopies) {
  LB_REQUIRE_GPU();
  AttentionCase<float> c(2, 2, 100, 64, {100, 57}, 0.1f, 44);
  c.kept_io = c.d_qkv_kept = c.qkv_bias = true;
  auto gpu = cuda_ops(GemmMath::kBf16, AttentionMode::kFlash);
  auto twin = cpu::make_ops<float>(GemmMath::kBf16, true, AttentionMode::kFlash);
  const auto g = run_attention(*gpu, c), t = run_attention(*twin, c);
  ASSERT_EQ(g.impl, AttentionImpl::kFlash) << gpu->flash_fallback();
  const std::vector<double> want = testing::column_sums(g.d_qkv, 3 * c.shape.ld, c.bias_init);
  double worst = 0, scale = 0;
  for (size_t i = 0; i < want.size(); ++i) {
    worst = testing::worse(worst, std::abs(double(g.d_qkv_bias[i]) - want[i]));
    scale = std::max(scale, std::abs(want[i] - c.bias_init));
  }
  std::printf("flash d(qkv) bias sums: max error %.2e of %.2e; device vs twin %.2e relative\n", worst, scale,
              rel_max_diff(g.d_qkv_bias, t.d_qkv_bias));
  EXPECT_GT(scale, 1e-3);
  EXPECT_LT(worst, 1e-5 * scale);
  EXPECT_LT(rel_max_diff(g.d_qkv_bias, t.d_qkv_bias), 2e-2);
}

TEST(GpuFlashAttention, CallsItCannotTakeRunTheHandWrittenOne) {
  LB_REQUIRE_GPU();
  auto fp32 = cuda_ops(GemmMath::kFp32, AttentionMode::kFlash);
  // What a model lays its arena out by (no probability slots only where every call runs flash).
  EXPECT_FALSE(fp32->attention_runs_flash(64));
  EXPECT_FALSE(cuda_ops(GemmMath::kBf16, AttentionMode::kFlash)->attention_runs_flash(32));
  EXPECT_FALSE(cuda_ops(GemmMath::kBf16, AttentionMode::kNative)->attention_runs_flash(64));
  EXPECT_TRUE(cuda_ops(GemmMath::kBf16, AttentionMode::kFlash)->attention_runs_flash(64));
  const auto r = run_attention(*fp32, AttentionCase<float>(1, 2, 16, 64, {16}, 0.f, 24));
  EXPECT_EQ(r.impl, AttentionImpl::kNative);
  EXPECT_NE(fp32->flash_fallback().find("16-bit"), std::string::npos) << fp32->flash_fallback();
  auto bf16 = cuda_ops(GemmMath::kBf16, AttentionMode::kFlash);
  const auto h = run_attention(*bf16, AttentionCase<float>(1, 2, 16, 32, {16}, 0.f, 25));
  EXPECT_EQ(h.impl, AttentionImpl::kNative);
  EXPECT_NE(bf16->flash_fallback().find("head_dim 32"), std::string::npos) << bf16->flash_fallback();
  // ... and the same call with a head size it takes clears the reason.
  EXPECT_EQ(run_attention(*bf16, AttentionCase<float>(1, 1, 16, 64, {16}, 0.f, 26)).impl, AttentionImpl::kFlash);
  EXPECT_EQ(bf16->flash_fallback(), "");
}

// A bert-tiny bf16 step with cast reuse, where the model hands the flash attention kept 16-bit
// copies of q, k, v, ctx and d(ctx) (FlashHalfIO): the device against the CPU twin doing the
// same, loss and gradients (each tensor relative to its largest value). Both arenas hold no
// [B, A, S, S] slots (Ops::attention_runs_flash), so the backward's scratch for D is [B, A, S].
TEST(GpuFlashAttention, Bf16StepFromKeptCopiesMatchesTheTwin) {
  LB_REQUIRE_GPU();
  BertConfig cfg;
  ASSERT_TRUE(bert_preset("bert-tiny", &cfg).is_ok());
  const int B = 2, S = 40, P = 4;
  auto gpu = cuda_ops(GemmMath::kBf16, AttentionMode::kFlash);
  auto twin = cpu::make_ops<float>(GemmMath::kBf16, true, AttentionMode::kFlash);
  ASSERT_TRUE(gpu->attention_reads_only_gemm_operands());
  ASSERT_TRUE(twin->attention_reads_only_gemm_operands());
  BertModel<float> gm(cfg, *gpu, {B, S, P, Recompute::kNone, true}), cm(cfg, *twin, {B, S, P, Recompute::kNone, true});
  ASSERT_EQ(gm.activation_bytes(), cm.activation_bytes());
  ASSERT_LT(gm.activation_bytes(), BertModel<float>::activation_bytes_for(cfg, {B, S, P, Recompute::kNone, true},
                                                                          {true, true, false}));
  gm.init_params(8);
  cm.init_params(8);
  const Batch batch = testing::random_batch(B, S, P, cfg.vocab_size, 9);
  gm.zero_grads();
  cm.zero_grads();
  const double lg = gm.forward(batch, StepContext{true, 3, 1}).total_loss;
  const double lc = cm.forward(batch, StepContext{true, 3, 1}).total_loss;
  gm.backward(1.0f);
  cm.backward(1.0f);
  ASSERT_EQ(gpu->flash_fallback(), "");
  const size_t total = cm.table().total_elements();
  const std::vector<float> g = testing::to_host(gm.grads(), total);
  double worst = 0;
  for (const ParamEntry& e : cm.table().entries()) {
    if (testing::zero_in_exact_arithmetic(e.name)) continue;
    const std::vector<float> want(cm.grads() + e.offset, cm.grads() + e.offset + e.numel);
    const std::vector<float> got(g.begin() + e.offset, g.begin() + e.offset + e.numel);
    worst = std::max(worst, rel_max_diff(got, want));
  }
  std::printf("flash bf16 step from kept copies: loss gpu %.6f twin %.6f, worst gradient rel %.2e\n", lg, lc, worst);
  EXPECT_NEAR(lg, lc, 1e-4 * std::abs(lc));
  EXPECT_LT(worst, 2e-2);
}

// More (sequence, head) pairs than a grid's y or z holds (65,535): 4,096 sequences of 16
// heads, 65,536 pairs (once the grid's y, a failed launch). The last sequence's ctx and
// d(q, k, v) are bit for bit those of the same sequence run alone (no dropout: every pair's
// tiles are computed alone, in a fixed order). Too many blocks for the emulator: a GPU check.
TEST(GpuFlashAttention, MoreSequenceHeadPairsThanAGridDimensionHolds) {
  LB_REQUIRE_GPU();
  if (testing::on_emulator()) GTEST_SKIP() << "65,536 blocks of flash attention are a GPU's work, not the emulator's";
  const int B = 4096, A = 16, S = 16, D = 64;  // one partial tile per pair: the fewest inputs
  AttentionCase<float> all(B, A, S, D, {16, 10}, 0.f, 31);
  AttentionCase<float> last(1, A, S, D, {10}, 0.f, 32);
  const size_t qkv_row = size_t(S) * 3 * A * D, ctx_row = size_t(S) * A * D;
  std::copy(all.qkv.end() - qkv_row, all.qkv.end(), last.qkv.begin());
  std::copy(all.d_ctx.end() - ctx_row, all.d_ctx.end(), last.d_ctx.begin());
  ASSERT_TRUE(std::equal(last.mask.begin(), last.mask.end(), all.mask.end() - S));
  auto gpu = cuda_ops(GemmMath::kBf16, AttentionMode::kFlash);
  const auto a = run_attention(*gpu, all), l = run_attention(*gpu, last);
  ASSERT_EQ(a.impl, AttentionImpl::kFlash) << gpu->flash_fallback();
  EXPECT_TRUE(std::equal(l.ctx.begin(), l.ctx.end(), a.ctx.end() - ctx_row));
  EXPECT_TRUE(std::equal(l.d_qkv.begin(), l.d_qkv.end(), a.d_qkv.end() - qkv_row));
}

}  // namespace
}  // namespace lansbert
