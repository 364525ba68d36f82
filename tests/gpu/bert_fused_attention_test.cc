// bert-tiny with the cudnn attention, without and with attention dropout (the fused path
// applies lansbert's own keep mask), against the same model with the hand-written attention
// on the same device, from the same initial parameters and batch (padded sequences, hidden
// dropout on): the fused attention
// must be used in every layer and the loss and every parameter's gradient must stay close.
// The bounds are loose first guesses for bf16 attention inside an fp32 model (the losses
// within 1e-2 relative, gradients within 1e-1 of each tensor's largest value); the printed
// errors are what a GPU run should use to tighten them. Skipped without a device or cuDNN.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>

#include "../model/model_test_util.h"
#include "cuda_ops.cuh"
#include "gpu_test_util.h"
#include "lansbert/backend/profiling_ops.h"
#include "lansbert/model/bert_model.h"

namespace lansbert {
namespace {

class BertFusedAttention : public ::testing::TestWithParam<float> {};

TEST_P(BertFusedAttention, BertTinyStepWithCudnnAttentionStaysCloseToNative) {
  LB_REQUIRE_GPU();
  BertConfig cfg;
  ASSERT_TRUE(bert_preset("bert-tiny", &cfg).is_ok());
  cfg.attention_dropout = GetParam();
  const int B = 4, S = 64, P = 10;
  cuda::OpsOptions fo;
  fo.attention = AttentionMode::kCudnn;
  cuda::CudaOps native_ops{cuda::OpsOptions{}}, fused_ops{fo};
  const std::string avail = fused_ops.fused().availability();
  std::printf("  fused attention: %s\n", avail.c_str());
  if (avail.rfind("unavailable", 0) == 0) GTEST_SKIP() << "cuDNN fused attention " << avail;
  ProfilingOps<float> counted(fused_ops);  // counts the attention calls that reach the backend
  BertModel<float> ref(cfg, native_ops, {B, S, P}), got(cfg, counted, {B, S, P});
  ref.init_params(42);
  got.init_params(42);
  const Batch batch = testing::random_batch(B, S, P, cfg.vocab_size, 7);
  const StepContext ctx{true, 1234, 3};
  const ForwardResult rr = ref.forward(batch, ctx), rg = got.forward(batch, ctx);
  EXPECT_EQ(fused_ops.fused().last_fallback(), "") << "the fused path was not used";
  std::printf("  loss native %.6f fused %.6f\n", rr.total_loss, rg.total_loss);
  EXPECT_NEAR(rg.total_loss, rr.total_loss, 1e-2 * std::fabs(rr.total_loss));
  ref.zero_grads();
  got.zero_grads();
  ref.backward(1.0f);
  got.backward(1.0f);
  EXPECT_EQ(counted.entries().at("attention_backward").calls, cfg.layers);
  // A fused backward that could not run falls back to the hand-written one (and sets the
  // reason, which a later successful backward does not clear): the gradients would still
  // match, so only this says whether the fused backward ran in every layer.
  EXPECT_EQ(fused_ops.fused().last_fallback(), "") << "a fused backward fell back";
  const size_t total = ref.table().total_elements();
  const std::vector<float> gr = testing::to_host(ref.grads(), total), gg = testing::to_host(got.grads(), total);
  double worst = 0;
  for (const ParamEntry& e : ref.table().entries()) {
    const std::vector<float> want(gr.begin() + e.offset, gr.begin() + e.offset + e.numel);
    const std::vector<float> have(gg.begin() + e.offset, gg.begin() + e.offset + e.numel);
    const testing::ErrorStats s = testing::compare(have, want);
    worst = std::max(worst, s.rel());
    EXPECT_LE(s.rel(), 1e-1) << e.name << ": max_abs " << s.max_abs << " max_ref " << s.max_ref;
  }
  std::printf("  attention dropout %.2f: worst per-tensor gradient rel error %.3e over %zu tensors\n", GetParam(),
              worst, ref.table().size());
}

INSTANTIATE_TEST_SUITE_P(AttentionDropout, BertFusedAttention, ::testing::Values(0.0f, 0.1f));

// batch.recompute: attention with the fused attention (ModelLimits::attention_stats): each
// layer keeps its statistics and none is recomputed; the step equals the one that keeps
// everything (to 1e-5 of each tensor's largest gradient, in case cuDNN's dQ accumulation is
// not deterministic; the printed error says whether it is bitwise).
TEST(BertFusedAttentionRecompute, KeptStatisticsGiveTheStepWithoutRecomputation) {
  LB_REQUIRE_GPU();
  BertConfig cfg;
  ASSERT_TRUE(bert_preset("bert-tiny", &cfg).is_ok());
  const int B = 4, S = 64, P = 10;
  cuda::OpsOptions fo;
  fo.attention = AttentionMode::kCudnn;
  cuda::CudaOps kept_ops{fo}, re_ops{fo};
  const std::string avail = kept_ops.fused().availability();
  if (avail.rfind("unavailable", 0) == 0) GTEST_SKIP() << "cuDNN fused attention " << avail;
  ProfilingOps<float> counted(re_ops);
  BertModel<float> kept(cfg, kept_ops, {B, S, P}), re(cfg, counted, {B, S, P, Recompute::kAttention, true});
  kept.init_params(42);
  re.init_params(42);
  const Batch batch = testing::random_batch(B, S, P, cfg.vocab_size, 7);
  const StepContext ctx{true, 1234, 3};
  const ForwardResult rk = kept.forward(batch, ctx), rr = re.forward(batch, ctx);
  EXPECT_EQ(rk.total_loss, rr.total_loss);
  kept.zero_grads();
  re.zero_grads();
  kept.backward(1.0f);
  re.backward(1.0f);
  EXPECT_EQ(re_ops.fused().last_fallback(), "") << "the fused path was not used throughout";
  EXPECT_EQ(counted.entries().at("attention_forward").calls, cfg.layers) << "a fused layer was recomputed";
  const size_t total = kept.table().total_elements();
  const std::vector<float> gk = testing::to_host(kept.grads(), total), gr = testing::to_host(re.grads(), total);
  double worst = 0;
  for (const ParamEntry& e : kept.table().entries()) {
    const testing::ErrorStats st = testing::compare(std::vector<float>(gr.begin() + e.offset, gr.begin() + e.offset + e.numel),
                                                    std::vector<float>(gk.begin() + e.offset, gk.begin() + e.offset + e.numel));
    if (testing::zero_in_exact_arithmetic(e.name)) continue;  // rounding noise in both runs
    worst = std::max(worst, st.rel());
    EXPECT_LE(st.rel(), 1e-5) << e.name;
  }
  std::printf("  recompute attention with kept statistics: worst per-tensor gradient rel error %.3e\n", worst);
}

}  // namespace
}  // namespace lansbert
