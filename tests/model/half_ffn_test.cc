// 16-bit activations (ModelLimits::half_activations) in the whole model on the CPU backend with
// emulated bf16/fp16 GEMMs, with the hand-written and the flash attention (which then also
// writes d(q, k, v) as kept copies): a training step tracks the fp32-stored run within the
// 16-bit rounding (and differs from it: the path runs), cast reuse changes no bits (the 16-bit
// gradients are read from their kept copies with reuse and rounded in the pass without), the
// arena holds one 2-byte [N, I] buffer more per layer, and a backend without 16-bit GEMMs is
// refused.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "lansbert/backend/cpu_ops.h"
#include "lansbert/core/arena.h"
#include "lansbert/model/bert_model.h"
#include "model_test_util.h"

namespace lansbert {
namespace {

BertConfig two_layers() {
  BertConfig cfg;
  EXPECT_TRUE(bert_preset("bert-tiny", &cfg).is_ok());
  return cfg;
}

struct Step {
  std::vector<double> losses;
  std::vector<float> grads;
};

// Two accumulated micro-steps with dropout, then an eval forward.
Step run(Ops<float>& ops, bool half_activations, int B, int S, int P, bool flash = false) {
  const BertConfig cfg = two_layers();
  BertModel<float> m(cfg, ops, {B, S, P, Recompute::kNone, flash, half_activations});
  m.init_params(7);
  const Batch b1 = testing::random_batch(B, S, P, cfg.vocab_size, 31);
  const Batch b2 = testing::random_batch(B, S, P, cfg.vocab_size, 32);
  Step s;
  m.zero_grads();
  s.losses.push_back(m.forward(b1, StepContext{true, 3, 1}).total_loss);
  m.backward(0.5f);
  s.losses.push_back(m.forward(b2, StepContext{true, 3, 2}).total_loss);
  m.backward(0.5f);
  s.losses.push_back(m.forward(b1, StepContext{false, 3, 3}).total_loss);
  s.grads.assign(m.grads(), m.grads() + m.table().total_elements());
  return s;
}

double relative_difference(const std::vector<float>& a, const std::vector<float>& b) {
  double d = 0, r = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    d += (double(a[i]) - b[i]) * (double(a[i]) - b[i]);
    r += double(b[i]) * b[i];
  }
  return std::sqrt(d / r);
}

std::unique_ptr<Ops<float>> make(GemmMath math, bool flash, bool reuse = true) {
  return cpu::make_ops<float>(math, reuse, flash ? AttentionMode::kFlash : AttentionMode::kNative);
}

TEST(HalfFfn, TracksTheFp32StoredFfnWithinTheRounding) {
  const int B = 3, S = 24, P = 4;
  for (bool flash : {false, true})
  for (GemmMath math : {GemmMath::kBf16, GemmMath::kFp16}) {
    SCOPED_TRACE(std::string(gemm_math_name(math)) + (flash ? ", flash attention" : ""));
    auto ops32 = make(math, flash), ops16 = make(math, flash);
    EXPECT_EQ(ops16->attention_keeps_input_gradients(), flash);
    const Step ref = run(*ops32, false, B, S, P, flash), half = run(*ops16, true, B, S, P, flash);
    for (size_t i = 0; i < ref.losses.size(); ++i)
      EXPECT_NEAR(half.losses[i], ref.losses[i], 2e-3 * std::fabs(ref.losses[i])) << "loss " << i;
    const double diff = relative_difference(half.grads, ref.grads);
    std::printf("  %s%s: gradients differ by %.2e relative (norm), losses %.6f vs %.6f\n", gemm_math_name(math),
                flash ? ", flash" : "", diff, half.losses[0], ref.losses[0]);
    // A bf16 rounding of the pre-activation and of d(act) is ~2^-9 relative per element.
    EXPECT_LT(diff, math == GemmMath::kBf16 ? 1e-2 : 2e-3);
    EXPECT_NE(0, std::memcmp(half.grads.data(), ref.grads.data(), ref.grads.size() * sizeof(float)))
        << "16-bit FFN activations changed no gradient bit: the path did not run";
  }
}

// (With the hand-written attention: the flash attention without cast reuse reads fp32 inputs
// and differs from itself with reuse by design, FlashAttention.Bf16StepFromKeptCopiesTracksTheFp32Path;
// its d(q, k, v) copies are checked op by op, FlashAttention.KeptInputGradientsAreTheRoundedFp32.)
TEST(HalfFfn, CastReuseChangesNoBits) {
  const int B = 2, S = 20, P = 3;
  for (GemmMath math : {GemmMath::kBf16, GemmMath::kFp16}) {
    SCOPED_TRACE(gemm_math_name(math));
    auto reuse = make(math, false, true), plain = make(math, false, false);
    const Step r = run(*reuse, true, B, S, P), p = run(*plain, true, B, S, P);
    EXPECT_EQ(r.losses, p.losses);
    EXPECT_EQ(0, std::memcmp(r.grads.data(), p.grads.data(), r.grads.size() * sizeof(float)));
  }
}

// Each layer holds the FFN's pre-activation in 2 bytes an element instead of 4: the fp32
// buffer is gone (the GELU output's fp32 span, where only its copy is written, is an address
// range that costs nothing either way). Where only copies are written, the LayerNorm outputs
// read by GEMMs and the next residual add (h1 of each layer, h2 of all but the last) and the
// LayerNorms' input sums (res1, res2: kept copies only) hold no fp32 either, except when whole
// layers are recomputed (BertState::residual_copy_only).
TEST(HalfFfn, ArenaHoldsThePreActivationIn16BitsOnly) {
  const BertConfig cfg = two_layers();
  const int B = 2, S = 32, P = 4;
  const size_t NI2 = size_t(B) * S * cfg.intermediate * 2, NH4 = size_t(B) * S * cfg.hidden * 4;
  ASSERT_EQ(NI2 % Arena::kAlign, 0u);
  ASSERT_EQ(NH4 % Arena::kAlign, 0u);
  for (bool unwritten : {false, true}) {
    for (Recompute r : {Recompute::kNone, Recompute::kAttention, Recompute::kLayers}) {
      const size_t base = BertModel<float>::activation_bytes_for(cfg, {B, S, P, r}, {unwritten});
      const size_t half = BertModel<float>::activation_bytes_for(cfg, {B, S, P, r, false, true}, {unwritten});
      // Recomputing layers, the layers share one set of buffers.
      // h1 and h2 (but the last layer's), and the LayerNorm input sums res1 and res2.
      const size_t residual = unwritten && r != Recompute::kLayers ? (4 * cfg.layers - 1) * NH4 : 0;
      EXPECT_EQ(base - half, (r == Recompute::kLayers ? 1 : cfg.layers) * NI2 + residual) << recompute_name(r);
    }
  }
  auto ops = cpu::make_ops<float>(GemmMath::kBf16);
  BertModel<float> m(cfg, *ops, {B, S, P, Recompute::kNone, false, true});
  EXPECT_EQ(m.activation_bytes(), BertModel<float>::activation_bytes_for(cfg, {B, S, P, Recompute::kNone, false, true},
                                                                          OutputStorage::of(*ops, cfg)));
}

TEST(HalfFfnDeathTest, RefusedWithoutA16BitGemmFormat) {
  const BertConfig cfg = two_layers();
  auto ops = cpu::make_ops<float>(GemmMath::kFp32);
  EXPECT_DEATH(BertModel<float>(cfg, *ops, {2, 16, 2, Recompute::kNone, false, true}),
               "16-bit activations \\(precision.activations: 16bit\\) need bf16/fp16 GEMMs");
}

}  // namespace
}  // namespace lansbert
