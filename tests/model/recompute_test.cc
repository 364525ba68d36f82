// Activation recomputation (ModelLimits::recompute): the layers share their attention
// probabilities (kAttention) or one set of activation buffers (kLayers), and the backward
// recomputes what was overwritten. It must change nothing but memory and time: the same loss, the same gradient bits over two accumulated
// micro-steps, the same gradient-ready calls, for fp32, fp64 and the emulated 16-bit GEMMs
// (whose kept operand copies are keyed by the now shared addresses).
#include <gtest/gtest.h>

#include <cstring>
#include <utility>
#include <vector>

#include "lansbert/backend/cpu_ops.h"
#include "lansbert/core/arena.h"
#include "lansbert/model/bert_model.h"
#include "model_test_util.h"
#include "stats_attention_ops.h"

namespace lansbert {
namespace {

// Three layers, so that one is recomputed between two others; dropout on everywhere.
BertConfig three_layers() {
  BertConfig cfg;
  EXPECT_TRUE(bert_preset("bert-tiny", &cfg).is_ok());
  cfg.layers = 3;
  return cfg;
}

struct Trace {
  std::vector<double> losses;
  std::vector<std::pair<size_t, size_t>> ready;
};

// Two micro-steps accumulated into the gradients (different dropout masks), then an eval
// forward.
template <typename T>
Trace run(BertModel<T>& m, const Batch& b1, const Batch& b2) {
  Trace t;
  m.zero_grads();
  t.losses.push_back(m.forward(b1, StepContext{true, 11, 1}).total_loss);
  m.backward(T(0.5), [&](size_t first, size_t end) { t.ready.emplace_back(first, end); });
  t.losses.push_back(m.forward(b2, StepContext{true, 11, 2}).total_loss);
  m.backward(T(0.5), [&](size_t first, size_t end) { t.ready.emplace_back(first, end); });
  t.losses.push_back(m.forward(b1, StepContext{false, 11, 3}).total_loss);
  return t;
}

template <typename T>
void expect_same_bits(Recompute mode, GemmMath math, bool reuse_casts, bool half_activations = false) {
  SCOPED_TRACE(std::string(recompute_name(mode)) + ", " + gemm_math_name(math) + (reuse_casts ? " with cast reuse" : "") +
               (half_activations ? ", 16-bit activations" : ""));
  const BertConfig cfg = three_layers();
  ASSERT_GT(cfg.hidden_dropout, 0.f);
  ASSERT_GT(cfg.attention_dropout, 0.f);
  const int B = 3, S = 16, P = 3;
  const Batch b1 = testing::random_batch(B, S, P, cfg.vocab_size, 21);
  const Batch b2 = testing::random_batch(2, S, P, cfg.vocab_size, 22);  // smaller than the limits
  auto ops_plain = cpu::make_ops<T>(math, reuse_casts), ops_re = cpu::make_ops<T>(math, reuse_casts);
  BertModel<T> plain(cfg, *ops_plain, {B, S, P, Recompute::kNone, false, half_activations}),
      re(cfg, *ops_re, {B, S, P, mode, false, half_activations});
  plain.init_params(5);
  re.init_params(5);
  const Trace tp = run(plain, b1, b2), tr = run(re, b1, b2);
  EXPECT_EQ(tp.losses, tr.losses);
  EXPECT_EQ(tp.ready, tr.ready);
  const size_t n = plain.table().total_elements();
  EXPECT_EQ(0, std::memcmp(plain.grads(), re.grads(), n * sizeof(T)));
  // The 16-bit copies: the recomputed producers write theirs again (and, recomputing layers,
  // the layers' inputs are converted again).
  if (is_half_gemm(math) && reuse_casts) {
    EXPECT_GT(ops_re->gemm_operand_copy_writes(), ops_plain->gemm_operand_copy_writes());
    if (mode == Recompute::kLayers)
      EXPECT_GT(ops_re->gemm_operand_conversions(), ops_plain->gemm_operand_conversions());
    else
      EXPECT_EQ(ops_re->gemm_operand_conversions(), ops_plain->gemm_operand_conversions());
  }
}

TEST(Recompute, SameLossesAndGradientBits) {
  for (Recompute mode : {Recompute::kAttention, Recompute::kLayers}) {
    expect_same_bits<float>(mode, GemmMath::kFp32, true);
    expect_same_bits<double>(mode, GemmMath::kFp32, true);
    for (GemmMath math : {GemmMath::kBf16, GemmMath::kFp16}) {
      expect_same_bits<float>(mode, math, true);
      expect_same_bits<float>(mode, math, false);
      expect_same_bits<float>(mode, math, true, true);
    }
  }
}

// An attention that saves only softmax statistics (the CUDA backend's cuDNN path, played by
// StatsAttentionOps, whose first layer always falls back to the hand-written attention):
// with ModelLimits::attention_stats each layer keeps its statistics, so recomputing the
// attention skips the fused layers, recomputes the one that fell back, and still gives the
// bits of a run that recomputes every layer (the statistics sharing the probabilities'
// memory) and of one that keeps everything. A skipped layer whose statistics were overwritten,
// or a fallback layer not recomputed, would differ.
template <typename T>
void expect_fused_layers_not_recomputed(GemmMath math) {
  SCOPED_TRACE(gemm_math_name(math));
  const BertConfig cfg = three_layers();
  const int B = 3, S = 16, P = 3;
  const Batch b1 = testing::random_batch(B, S, P, cfg.vocab_size, 21);
  const Batch b2 = testing::random_batch(2, S, P, cfg.vocab_size, 22);
  auto cpu1 = cpu::make_ops<T>(math), cpu2 = cpu::make_ops<T>(math), cpu3 = cpu::make_ops<T>(math);
  testing::StatsAttentionOps<T> ops_none(*cpu1), ops_shared(*cpu2), ops_stats(*cpu3);
  BertModel<T> none(cfg, ops_none, {B, S, P}), shared(cfg, ops_shared, {B, S, P, Recompute::kAttention}),
      stats(cfg, ops_stats, {B, S, P, Recompute::kAttention, true});
  for (BertModel<T>* m : {&none, &shared, &stats}) m->init_params(5);
  const Trace tn = run(none, b1, b2), tsh = run(shared, b1, b2), tst = run(stats, b1, b2);
  EXPECT_EQ(tn.losses, tsh.losses);
  EXPECT_EQ(tn.losses, tst.losses);
  EXPECT_EQ(tn.ready, tst.ready);
  const size_t n = none.table().total_elements();
  EXPECT_EQ(0, std::memcmp(none.grads(), shared.grads(), n * sizeof(T)));
  EXPECT_EQ(0, std::memcmp(none.grads(), stats.grads(), n * sizeof(T)));
  // Two training forwards and an eval forward of three layers; recomputing, the two lower
  // layers again before each of the two backwards: both without the statistics' buffers,
  // only the first (the fallback) with them.
  EXPECT_EQ(ops_none.forwards, 9);
  EXPECT_EQ(ops_shared.forwards, 13);
  EXPECT_EQ(ops_stats.forwards, 11);
  // The statistics' buffers: B A S per layer (each rounded up to the arena's alignment).
  const size_t stats_bytes = (size_t(B) * cfg.heads * S * sizeof(T) + Arena::kAlign - 1) / Arena::kAlign * Arena::kAlign;
  EXPECT_EQ(BertModel<T>::activation_bytes_for(cfg, {B, S, P, Recompute::kAttention, true}),
            BertModel<T>::activation_bytes_for(cfg, {B, S, P, Recompute::kAttention}) + size_t(cfg.layers) * stats_bytes);
  // They do not change the other layouts.
  for (Recompute mode : {Recompute::kNone, Recompute::kLayers})
    EXPECT_EQ(BertModel<T>::activation_bytes_for(cfg, {B, S, P, mode, true}),
              BertModel<T>::activation_bytes_for(cfg, {B, S, P, mode}));
}

TEST(Recompute, FusedAttentionLayersKeepTheirStatisticsAndAreNotRecomputed) {
  expect_fused_layers_not_recomputed<float>(GemmMath::kFp32);
  expect_fused_layers_not_recomputed<double>(GemmMath::kFp32);
  // The emulated 16-bit GEMMs with cast reuse: kept copies keyed by the shared addresses, and
  // the dropped-out probabilities without memory of their own.
  expect_fused_layers_not_recomputed<float>(GemmMath::kBf16);
  expect_fused_layers_not_recomputed<float>(GemmMath::kFp16);
}

// Each layer beyond the first adds to the arena: without recomputation all its activations;
// recomputing the attention, all but the probabilities (B A S^2, and their dropped-out copy
// where it has memory of its own); recomputing layers, only its output (N x H).
TEST(Recompute, ArenaHoldsWhatIsNotRecomputed) {
  BertConfig cfg = three_layers();
  const int B = 2, S = 32, P = 4;
  const size_t NH = size_t(B) * S * cfg.hidden * sizeof(float);
  const size_t BASS = size_t(B) * cfg.heads * S * S * sizeof(float);
  for (bool unwritten : {false, true}) {
    auto bytes = [&](int layers, Recompute mode) {
      BertConfig c = cfg;
      c.layers = layers;
      return BertModel<float>::activation_bytes_for(c, {B, S, P, mode}, {unwritten});
    };
    // One layer: recomputation shares nothing.
    for (Recompute mode : {Recompute::kAttention, Recompute::kLayers}) EXPECT_EQ(bytes(1, mode), bytes(1, Recompute::kNone));
    const size_t layer = (bytes(3, Recompute::kNone) - bytes(1, Recompute::kNone)) / 2;
    EXPECT_GT(layer, 8 * NH);  // res1, h1, res2, h2 and the FFN's N x I at least
    EXPECT_EQ(bytes(3, Recompute::kLayers), bytes(1, Recompute::kLayers) + 2 * NH);
    EXPECT_EQ(bytes(3, Recompute::kAttention), bytes(1, Recompute::kAttention) + 2 * (layer - (unwritten ? 1 : 2) * BASS));
  }
  auto ops = cpu::make_ops<float>();
  for (Recompute mode : {Recompute::kAttention, Recompute::kLayers}) {
    BertModel<float> m(cfg, *ops, {B, S, P, mode});
    EXPECT_EQ(m.activation_bytes(), BertModel<float>::activation_bytes_for(cfg, {B, S, P, mode}));
  }
}

// The plan's count of the kept 16-bit copies against what the (emulated) backend holds after
// a step, with and without recomputation: exactly the weights' copy (the parameter buffer)
// plus the count.
TEST(Recompute, KeptCopyEstimateMatchesWhatTheBackendHolds) {
  const BertConfig cfg = three_layers();
  const int B = 3, S = 16, P = 3;
  const Batch b = testing::random_batch(B, S, P, cfg.vocab_size, 23);
  for (Recompute recompute : {Recompute::kNone, Recompute::kAttention, Recompute::kLayers})
    for (int variant = 0; variant < 3; ++variant) {
      // the flash attention: q/k/v kept, no probabilities; 16-bit activations: the same copies
      const bool flash = variant == 1, half_activations = variant == 2;
      auto ops = cpu::make_ops<float>(GemmMath::kBf16, true, flash ? AttentionMode::kFlash : AttentionMode::kNative);
      BertModel<float> m(cfg, *ops, {B, S, P, recompute, flash, half_activations});
      m.init_params(5);
      m.forward(b, StepContext{true, 11, 1});
      m.backward(1.0f);
      const size_t held = ops->kept_copy_bytes();
      const size_t estimate = BertModel<float>::kept_copy_bytes_for(cfg, {B, S, P, recompute, flash, half_activations}, true,
                                                                        !flash) +
                              2 * m.table().total_elements();
      SCOPED_TRACE(std::string(recompute_name(recompute)) + (flash ? ", flash" : "") + (half_activations ? ", 16-bit FFN" : ""));
      EXPECT_EQ(held, estimate);
    }
}

}  // namespace
}  // namespace lansbert
