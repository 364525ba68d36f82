// The flash attention's CPU twin (src/cpu/cpu_flash_attention.cc, `attention: flash`) against
// the hand-written attention: in fp64 without 16-bit rounding the two compute the same
// function with the same dropout masks, so they agree to rounding (1e-12) whatever the tiles;
// the backward is checked against central differences; with emulated bf16 GEMMs the flash
// attention's error is of the size of the hand-written one's; and a whole BERT step gives
// the same loss and gradients either way.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <map>
#include <vector>

#include "attention_run.h"
#include "fd.h"
#include "lansbert/backend/cpu_ops.h"
#include "lansbert/core/arena.h"
#include "lansbert/backend/profiling_ops.h"
#include "lansbert/model/bert_model.h"
#include "lansbert/model/flops.h"
#include "model_test_util.h"

namespace lansbert {
namespace {

using testing::AttentionCase;
using testing::rel_max_diff;
using testing::run_attention;

template <typename T>
void expect_flash_matches_native(const AttentionCase<T>& c, GemmMath math, double tol) {
  auto native = cpu::make_ops<T>(math), flash = cpu::make_ops<T>(math, true, AttentionMode::kFlash);
  const auto n = run_attention(*native, c), f = run_attention(*flash, c);
  EXPECT_EQ(n.impl, AttentionImpl::kNative);
  EXPECT_EQ(f.impl, AttentionImpl::kFlash);
  EXPECT_LT(rel_max_diff(f.ctx, n.ctx), tol);
  EXPECT_LT(rel_max_diff(f.d_qkv, n.d_qkv), tol);
  double norm = 0;  // not trivially zero
  for (T x : f.d_qkv) norm += double(x) * double(x);
  EXPECT_GT(norm, 1e-6);
}

TEST(FlashAttention, MatchesTheHandWrittenOneInDouble) {
  // Two key tiles and a partial one (S = 37 with tiles of 32), padding, a sequence with no
  // unmasked key at all (zeros out, zero gradients), with and without dropout.
  for (float p : {0.0f, 0.3f}) {
    SCOPED_TRACE(p);
    expect_flash_matches_native(AttentionCase<double>(3, 2, 37, 8, {37, 20, 0}, p, 7), GemmMath::kFp32, 1e-12);
    expect_flash_matches_native(AttentionCase<double>(2, 3, 70, 64, {70, 33}, p, 8), GemmMath::kFp32, 1e-12);
  }
}

TEST(FlashAttention, FullyMaskedSequenceGivesZeros) {
  const AttentionCase<double> c(2, 2, 9, 4, {9, 0}, 0.2f, 3);
  auto flash = cpu::make_ops<double>(GemmMath::kFp32, true, AttentionMode::kFlash);
  const auto f = run_attention(*flash, c);
  const size_t H = c.shape.ld, S = c.shape.seq;
  for (size_t i = S * H; i < 2 * S * H; ++i) ASSERT_EQ(f.ctx[i], 0.0) << i;
  for (size_t i = S * 3 * H; i < 2 * S * 3 * H; ++i) ASSERT_EQ(f.d_qkv[i], 0.0) << i;
  for (size_t i = 2 * S; i < 4 * S; ++i) EXPECT_TRUE(std::isinf(f.stats[i]) && f.stats[i] > 0);  // lse of no key
}

TEST(FlashAttention, FloatMatchesTheHandWrittenOne) {
  expect_flash_matches_native(AttentionCase<float>(2, 2, 70, 64, {70, 41}, 0.1f, 9), GemmMath::kFp32, 1e-5);
}

// d(sum ctx * W)/d(q, k, v) by central differences in fp64, dropout on (its mask is fixed by
// the key, not by the inputs).
TEST(FlashAttention, BackwardMatchesFiniteDifferences) {
  AttentionCase<double> c(2, 2, 5, 3, {5, 3}, 0.3f, 11);
  auto flash = cpu::make_ops<double>(GemmMath::kFp32, true, AttentionMode::kFlash);
  const auto base = run_attention(*flash, c);
  auto loss = [&](const AttentionCase<double>& x) {
    const auto r = run_attention(*flash, x);
    double sum = 0;
    for (size_t i = 0; i < r.ctx.size(); ++i) sum += r.ctx[i] * x.d_ctx[i];
    return sum;
  };
  double worst = 0, largest = 0;
  const double h = 1e-6;
  for (size_t i = 0; i < c.qkv.size(); ++i) {
    AttentionCase<double> up = c, down = c;
    up.qkv[i] += h;
    down.qkv[i] -= h;
    const double fd = (loss(up) - loss(down)) / (2 * h);
    worst = testing::worse(worst, std::abs(fd - base.d_qkv[i]));
    largest = std::max(largest, std::abs(fd));
  }
  EXPECT_GT(largest, 1e-3);
  EXPECT_LT(worst / largest, 1e-7);
}

// With emulated bf16 GEMMs both attentions round their operands; the flash one also rounds
// the unnormalised probabilities of each tile and d(scores) where the hand-written one rounds
// the normalised probabilities and d(scores). Against fp32, its error stays of the same size.
TEST(FlashAttention, Bf16ErrorIsOfTheHandWrittenOnesSize) {
  for (float p : {0.0f, 0.1f}) {
    SCOPED_TRACE(p);
    const AttentionCase<float> c(2, 4, 96, 64, {96, 50}, p, 13);
    auto exact = cpu::make_ops<float>(), native = cpu::make_ops<float>(GemmMath::kBf16),
         flash = cpu::make_ops<float>(GemmMath::kBf16, true, AttentionMode::kFlash);
    const auto e = run_attention(*exact, c), n = run_attention(*native, c), f = run_attention(*flash, c);
    const double native_ctx = rel_max_diff(n.ctx, e.ctx), flash_ctx = rel_max_diff(f.ctx, e.ctx);
    const double native_grad = rel_max_diff(n.d_qkv, e.d_qkv), flash_grad = rel_max_diff(f.d_qkv, e.d_qkv);
    std::printf("bf16 vs fp32, max rel: ctx native %.2e flash %.2e; d(qkv) native %.2e flash %.2e\n", native_ctx,
                flash_ctx, native_grad, flash_grad);
    EXPECT_GT(flash_ctx, 0.0);  // it does round
    EXPECT_LT(flash_ctx, 2e-2);
    EXPECT_LT(flash_grad, 5e-2);
    EXPECT_LT(flash_ctx, 3 * native_ctx + 1e-3);
    EXPECT_LT(flash_grad, 3 * native_grad + 1e-3);
  }
}

// bert-tiny with three layers; every dropout is on.
BertConfig three_layer_tiny() {
  BertConfig cfg;
  EXPECT_TRUE(bert_preset("bert-tiny", &cfg).is_ok());
  cfg.layers = 3;
  EXPECT_GT(cfg.attention_dropout, 0.f);
  return cfg;
}

// One fp64 training step from parameters of seed 17: its loss, gradients and arena size.
struct StepOut {
  double loss;
  std::vector<double> grads;
  size_t bytes;
};
StepOut step(const BertConfig& cfg, Ops<double>& ops, ModelLimits lim, const Batch& batch) {
  BertModel<double> m(cfg, ops, lim);
  m.init_params(17);
  m.zero_grads();
  StepOut o;
  o.loss = m.forward(batch, StepContext{true, 5, 1}).total_loss;
  m.backward(1.0, [](size_t, size_t) {});
  o.grads.assign(m.grads(), m.grads() + m.table().total_elements());
  o.bytes = m.activation_bytes();
  return o;
}

// A whole bert-tiny step in fp64: the same loss and gradients as with the hand-written
// attention, also recomputing attention (the flash layers keep their statistics and are not
// recomputed).
TEST(FlashAttention, BertStepMatchesTheHandWrittenAttention) {
  const BertConfig cfg = three_layer_tiny();
  const int B = 3, S = 40, P = 4;
  const Batch batch = testing::random_batch(B, S, P, cfg.vocab_size, 31);
  auto run = [&](AttentionMode mode, Recompute re) {
    auto ops = cpu::make_ops<double>(GemmMath::kFp32, true, mode);
    return step(cfg, *ops, {B, S, P, re, mode == AttentionMode::kFlash}, batch);
  };
  const StepOut n = run(AttentionMode::kNative, Recompute::kNone), f = run(AttentionMode::kFlash, Recompute::kNone),
                r = run(AttentionMode::kFlash, Recompute::kAttention);
  EXPECT_NEAR(f.loss, n.loss, 1e-12 * std::abs(n.loss));
  EXPECT_LT(rel_max_diff(f.grads, n.grads), 1e-10);
  EXPECT_EQ(r.loss, f.loss);
  EXPECT_EQ(0, std::memcmp(r.grads.data(), f.grads.data(), f.grads.size() * sizeof(double)));
}

// The ops as they are, but answering `flash` for Ops::attention_runs_flash: the model lays out
// its arena by that answer.
template <typename T>
class FlashAnswerOps final : public ProfilingOps<T> {
 public:
  FlashAnswerOps(Ops<T>& inner, bool flash) : ProfilingOps<T>(inner), flash_(flash) {}
  bool attention_runs_flash(int) const override { return flash_; }

 private:
  bool flash_;
};

size_t aligned(size_t bytes) { return (bytes + Arena::kAlign - 1) / Arena::kAlign * Arena::kAlign; }

// Where every layer runs the flash attention (Ops::attention_runs_flash) the arena holds each
// layer's statistics, [B, A, S], instead of its [B, A, S, S] probability slots, and [B, A, S]
// of backward scratch instead of two [B, A, S, S] buffers: the same loss and gradient bits as
// with the slots, in each batch.recompute mode, in exactly that much less memory; recomputing
// the attention then lays out nothing else.
TEST(FlashAttention, ArenaHoldsNoProbabilitySlots) {
  const BertConfig cfg = three_layer_tiny();
  const int B = 3, S = 40, P = 4;
  const Batch batch = testing::random_batch(B, S, P, cfg.vocab_size, 37);
  auto flash = cpu::make_ops<double>(GemmMath::kFp32, true, AttentionMode::kFlash);
  ASSERT_TRUE(flash->attention_runs_flash(cfg.head_dim()));
  EXPECT_FALSE(cpu::make_ops<double>(GemmMath::kFp32, true, AttentionMode::kNative)->attention_runs_flash(64));
  FlashAnswerOps<double> slots(*flash, false);
  const size_t L = cfg.layers, BASS = aligned(sizeof(double) * B * cfg.heads * S * S),
               BAS = aligned(sizeof(double) * B * cfg.heads * S);
  // Slots saved: per layer the probabilities and their dropped-out copy (one shared pair when
  // recomputing), and d(probs), d(scores); statistics added: per layer (one shared set when
  // recomputing layers, which had them inside the probabilities' slot), and D's scratch.
  const std::map<Recompute, size_t> saved{{Recompute::kNone, (2 * L + 2) * BASS - (L + 1) * BAS},
                                          {Recompute::kAttention, 4 * BASS - BAS},
                                          {Recompute::kLayers, 4 * BASS - 2 * BAS}};
  std::map<Recompute, StepOut> lean;
  for (const auto& [re, fewer] : saved) {
    SCOPED_TRACE(recompute_name(re));
    lean[re] = step(cfg, *flash, {B, S, P, re, true}, batch);
    const StepOut with_slots = step(cfg, slots, {B, S, P, re, true}, batch);
    EXPECT_EQ(lean[re].loss, with_slots.loss);
    EXPECT_EQ(0, std::memcmp(lean[re].grads.data(), with_slots.grads.data(), with_slots.grads.size() * sizeof(double)));
    EXPECT_EQ(with_slots.bytes - lean[re].bytes, fewer);
  }
  EXPECT_EQ(lean[Recompute::kAttention].bytes, lean[Recompute::kNone].bytes);
  EXPECT_EQ(lean[Recompute::kAttention].loss, lean[Recompute::kNone].loss);
}

// Ops that say they run the flash attention but run the hand-written one stop the run instead
// of writing probabilities into slots the arena does not have.
TEST(FlashAttentionDeathTest, BrokenPromiseStopsTheRun) {
  BertConfig cfg;
  ASSERT_TRUE(bert_preset("bert-tiny", &cfg).is_ok());
  const int B = 2, S = 16, P = 2;
  auto native = cpu::make_ops<double>(GemmMath::kFp32, true, AttentionMode::kNative);
  FlashAnswerOps<double> lying(*native, true);
  BertModel<double> m(cfg, lying, {B, S, P});
  m.init_params(1);
  const Batch batch = testing::random_batch(B, S, P, cfg.vocab_size, 2);
  GTEST_FLAG_SET(death_test_style, "threadsafe");  // a forked child of OpenMP threads would hang
  EXPECT_DEATH(m.forward(batch, StepContext{true, 1, 1}), "Ops::attention_runs_flash");
}

// With emulated bf16 GEMMs and cast reuse the model makes q, k, v, ctx and d(ctx) as kept 16-bit
// copies only, and the flash attention reads and writes those (as the CUDA kernels do); without
// reuse it reads the fp32 tensors and rounds them itself. The two differ only in D = d(ctx) .
// ctx being taken from rounded values, so a step's loss and gradients agree closely; the copies
// it holds are no more than the hand-written attention's (which also keeps its probabilities).
TEST(FlashAttention, Bf16StepFromKeptCopiesTracksTheFp32Path) {
  BertConfig cfg;
  ASSERT_TRUE(bert_preset("bert-tiny", &cfg).is_ok());
  cfg.layers = 3;
  const int B = 3, S = 40, P = 4;
  const Batch batch = testing::random_batch(B, S, P, cfg.vocab_size, 33);
  struct Out {
    double loss;
    std::vector<float> grads;
    size_t held_after;
  };
  auto run = [&](AttentionMode mode, bool reuse) {
    auto ops = cpu::make_ops<float>(GemmMath::kBf16, reuse, mode);
    EXPECT_EQ(ops->attention_reads_only_gemm_operands(), reuse);
    BertModel<float> m(cfg, *ops, {B, S, P, Recompute::kNone, mode == AttentionMode::kFlash});
    m.init_params(19);
    m.zero_grads();
    Out o;
    o.loss = m.forward(batch, StepContext{true, 5, 1}).total_loss;
    m.backward(1.0f, [](size_t, size_t) {});
    o.grads.assign(m.grads(), m.grads() + m.table().total_elements());
    o.held_after = ops->kept_copy_bytes();
    return o;
  };
  const Out kept = run(AttentionMode::kFlash, true), plain = run(AttentionMode::kFlash, false),
            native = run(AttentionMode::kNative, true);
  std::printf("bf16 step: loss kept %.6f fp32-in %.6f native %.6f; grads kept vs fp32-in %.2e, vs native %.2e\n",
              kept.loss, plain.loss, native.loss, rel_max_diff(kept.grads, plain.grads),
              rel_max_diff(kept.grads, native.grads));
  EXPECT_NEAR(kept.loss, plain.loss, 1e-4 * std::abs(plain.loss));
  EXPECT_LT(rel_max_diff(kept.grads, plain.grads), 2e-2);
  EXPECT_NEAR(kept.loss, native.loss, 1e-3 * std::abs(native.loss));
  EXPECT_LT(kept.held_after, native.held_after);
}

// Rounded as GEMMs read a 16-bit operand.
std::vector<float> rounded(const std::vector<float>& x, GemmMath math) {
  std::vector<float> r(x.size());
  for (size_t i = 0; i < x.size(); ++i)
    r[i] = kern::round_to_half(x[i], gemm_half_format(math));
  return r;
}

// AttentionBackward::d_qkv_kept (16-bit activations): the flash attention writes d(q, k, v)
// into their kept copies, the fp32 results rounded once: what GEMMs read is the rounding of
// the same call's fp32 output, bit for bit, written as copies (nothing cast). The hand-written
// attention honours the request by keeping its fp32 output (a cast), with the same values.
TEST(FlashAttention, KeptInputGradientsAreTheRoundedFp32) {
  for (GemmMath math : {GemmMath::kBf16, GemmMath::kFp16})
    for (AttentionMode mode : {AttentionMode::kFlash, AttentionMode::kNative}) {
      SCOPED_TRACE(std::string(gemm_math_name(math)) + (mode == AttentionMode::kFlash ? " flash" : " native"));
      AttentionCase<float> c(2, 2, 40, 16, {40, 23}, 0.1f, 41);
      c.kept_io = true;
      auto plain = cpu::make_ops<float>(math, true, mode), kept = cpu::make_ops<float>(math, true, mode);
      EXPECT_EQ(kept->attention_keeps_input_gradients(), mode == AttentionMode::kFlash);
      const auto ref = run_attention(*plain, c);
      c.d_qkv_kept = true;
      const auto got = run_attention(*kept, c);
      EXPECT_EQ(got.d_qkv, rounded(ref.d_qkv, math));
      EXPECT_EQ(got.ctx, ref.ctx);
      // Besides the gradients the kept run casts the identity it reads them with, (3H)^2.
      const size_t n = ref.d_qkv.size(), eye = size_t(3 * c.shape.ld) * (3 * c.shape.ld);
      if (mode == AttentionMode::kFlash) {
        EXPECT_EQ(kept->gemm_operand_copy_writes() - plain->gemm_operand_copy_writes(), n);
        EXPECT_EQ(kept->gemm_operand_conversions() - plain->gemm_operand_conversions(), eye);
      } else {
        EXPECT_EQ(kept->gemm_operand_conversions() - plain->gemm_operand_conversions(), n + eye);
      }
    }
}

// AttentionBackward::d_qkv_bias: the projection's bias gradient is added to the column sums of
// d(q, k, v) as GEMMs read them, by the flash twin from the copies it writes (in the kernels'
// tile order: 100 rows are a tile of 64 and a tail) and by the hand-written attention through
// bias_add_backward_of_kept; an fp32 sum of ~200 values against the same sums in double.
TEST(FlashAttention, QkvBiasSumsAreTheColumnSumsOfTheKeptGradients) {
  for (GemmMath math : {GemmMath::kBf16, GemmMath::kFp16})
    for (AttentionMode mode : {AttentionMode::kFlash, AttentionMode::kNative}) {
      SCOPED_TRACE(std::string(gemm_math_name(math)) + (mode == AttentionMode::kFlash ? " flash" : " native"));
      AttentionCase<float> c(2, 2, 100, 16, {100, 57}, 0.1f, 43);
      c.kept_io = c.d_qkv_kept = c.qkv_bias = true;
      auto ops = cpu::make_ops<float>(math, true, mode);
      const auto r = run_attention(*ops, c);
      const std::vector<double> want = testing::column_sums(r.d_qkv, 3 * c.shape.ld, c.bias_init);
      ASSERT_EQ(r.d_qkv_bias.size(), want.size());
      double worst = 0, scale = 0;
      for (size_t i = 0; i < want.size(); ++i) {
        worst = testing::worse(worst, std::abs(double(r.d_qkv_bias[i]) - want[i]));
        scale = std::max(scale, std::abs(want[i] - c.bias_init));
      }
      EXPECT_GT(scale, 1e-3);  // not trivially the initial values
      EXPECT_LT(worst, 1e-5 * scale);
    }
}

// bench --profile's rows: the flash rows replace the attention's, with two GEMMs' FLOPs
// forward and seven backward (each backward kernel recomputes the scores and d(pd)), so a
// step counts three attention GEMMs per layer more than the model's FLOPs (flops.h).
TEST(FlashAttention, ProfileRows) {
  BertConfig cfg;
  ASSERT_TRUE(bert_preset("bert-tiny", &cfg).is_ok());
  const int B = 2, S = 32, P = 4;
  auto inner = cpu::make_ops<float>(GemmMath::kBf16, true, AttentionMode::kFlash);
  ProfilingOps<float> prof(*inner, nullptr, 2);
  BertModel<float> m(cfg, prof, {B, S, P, Recompute::kNone, true});
  m.init_params(3);
  m.zero_grads();
  m.forward(testing::random_batch(B, S, P, cfg.vocab_size, 4), StepContext{true, 1, 1});
  m.backward(1.0f, [](size_t, size_t) {});
  double flops = 0;
  bool fwd = false, bwd = false;
  for (const auto& [name, e] : prof.entries()) {
    flops += e.flops;
    EXPECT_NE(name, "softmax_dropout_forward");
    if (name == "flash_attention_forward") fwd = e.calls == cfg.layers;
    if (name == "flash_attention_backward") bwd = e.calls == cfg.layers;
  }
  EXPECT_TRUE(fwd);
  EXPECT_TRUE(bwd);
  const double one_gemm = 2.0 * B * cfg.heads * S * S * (cfg.hidden / cfg.heads);
  EXPECT_NEAR(flops, bert_train_flops(cfg, B, S, P) + 3 * cfg.layers * one_gemm, 1e-9 * flops);
}

}  // namespace
}  // namespace lansbert
