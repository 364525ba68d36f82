// A whole bert-tiny training micro-step (forward with dropout, backward) on the GPU against
// the CPU twin from the same initial parameters and batch: the losses and every parameter's
// gradient within 1e-4 relative (per tensor, relative to its largest reference gradient).
// Skipped without a device.
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "../model/model_test_util.h"
#include "cuda_ops.cuh"
#include "gpu_test_util.h"
#include "lansbert/backend/cpu_ops.h"
#include "lansbert/data/packing.h"
#include "lansbert/model/bert_model.h"

namespace lansbert {
namespace {

void expect_step_matches_cpu(const Batch& batch, int B, int S, int P) {
  BertConfig cfg;
  ASSERT_TRUE(bert_preset("bert-tiny", &cfg).is_ok());
  auto cpu_ops = cpu::make_ops<float>();
  auto gpu_ops = cuda::make_ops();
  BertModel<float> cpu_model(cfg, *cpu_ops, {B, S, P});
  BertModel<float> gpu_model(cfg, *gpu_ops, {B, S, P});
  cpu_model.init_params(42);
  gpu_model.init_params(42);
  const StepContext ctx{true, 1234, 3};

  const ForwardResult rc = cpu_model.forward(batch, ctx);
  const ForwardResult rg = gpu_model.forward(batch, ctx);
  std::printf("  loss cpu %.8f gpu %.8f (mlm %.8f / %.8f, nsp %.8f / %.8f)\n", rc.total_loss,
              rg.total_loss, rc.mlm_loss, rg.mlm_loss, rc.nsp_loss, rg.nsp_loss);
  EXPECT_NEAR(rg.total_loss, rc.total_loss, 1e-4 * std::fabs(rc.total_loss));
  EXPECT_NEAR(rg.mlm_loss, rc.mlm_loss, 1e-4 * std::fabs(rc.mlm_loss));
  EXPECT_NEAR(rg.nsp_loss, rc.nsp_loss, 1e-4 * std::fabs(rc.nsp_loss));
  EXPECT_EQ(rg.mlm_count, rc.mlm_count);
  EXPECT_EQ(rg.nsp_count, rc.nsp_count);

  cpu_model.zero_grads();
  gpu_model.zero_grads();
  cpu_model.backward(1.0f);
  gpu_model.backward(1.0f);
  const size_t total = cpu_model.table().total_elements();
  const std::vector<float> g_gpu = testing::to_host(gpu_model.grads(), total);
  double worst = 0, largest = 0;
  for (size_t i = 0; i < total; ++i) largest = std::max(largest, double(std::fabs(cpu_model.grads()[i])));
  for (const ParamEntry& e : cpu_model.table().entries()) {
    std::vector<float> want(cpu_model.grads() + e.offset, cpu_model.grads() + e.offset + e.numel);
    std::vector<float> got(g_gpu.begin() + e.offset, g_gpu.begin() + e.offset + e.numel);
    const testing::ErrorStats s = testing::compare(got, want);
    if (testing::zero_in_exact_arithmetic(e.name)) {
      const testing::ErrorStats noise = testing::compare(got, std::vector<float>(e.numel, 0.f));
      EXPECT_LE(noise.max_abs, 1e-6 * largest) << e.name << " should be rounding noise";
      continue;
    }
    worst = std::max(worst, s.rel());
    EXPECT_LE(s.rel(), 1e-4) << e.name << ": max_abs " << s.max_abs << " max_ref " << s.max_ref;
  }
  std::printf("  worst per-tensor gradient rel error %.3e over %zu tensors\n", worst,
              cpu_model.table().size());
}

TEST(GpuBert, TinyTrainingStepMatchesCpu) {
  LB_REQUIRE_GPU();
  const int B = 4, S = 64, P = 10;
  expect_step_matches_cpu(testing::random_batch(B, S, P, 30522, 7), B, S, P);
}

// A packed micro-batch (data/packing.h): positions from each sequence's [CLS], the NSP head
// at each [CLS], attention within each sequence, on fewer rows than sequences.
TEST(GpuBert, PackedTrainingStepMatchesCpu) {
  LB_REQUIRE_GPU();
  const int S = 64, P = 6;
  Batch batch = testing::batch_of_lengths({30, 12, 64, 25, 9, 40, 20}, S, P, 30522, 8);
  ASSERT_TRUE(pack_batch(&batch).is_ok());
  ASSERT_LT(batch.rows, batch.batch);
  expect_step_matches_cpu(batch, batch.batch, S, P);
}

// Activation recomputation on the device (ModelLimits::recompute): a model that recomputes
// its attention or its layers in the backward gives the kept model's loss and gradients, bit
// for bit, in fp32 and with bf16 GEMMs (kept 16-bit copies re-keyed at the shared addresses),
// over two accumulated micro-steps; the CPU's Recompute.* tests check the same on the host.
TEST(GpuBert, RecomputedStepEqualsKeptStep) {
  LB_REQUIRE_GPU();
  BertConfig cfg;
  ASSERT_TRUE(bert_preset("bert-tiny", &cfg).is_ok());
  cfg.layers = 3;
  const int B = 4, S = 64, P = 10;
  const Batch b1 = testing::random_batch(B, S, P, cfg.vocab_size, 7), b2 = testing::random_batch(B, S, P, cfg.vocab_size, 8);
  for (Recompute mode : {Recompute::kAttention, Recompute::kLayers})
  for (GemmMath math : {GemmMath::kFp32, GemmMath::kBf16}) {
    SCOPED_TRACE(std::string(recompute_name(mode)) + ", " + gemm_math_name(math));
    cuda::OpsOptions o;
    o.math = math;
    cuda::CudaOps kept_ops{o}, re_ops{o};
    BertModel<float> kept(cfg, kept_ops, {B, S, P}), re(cfg, re_ops, {B, S, P, mode});
    kept.init_params(42);
    re.init_params(42);
    kept.zero_grads();
    re.zero_grads();
    for (uint32_t step : {1u, 2u}) {
      const Batch& b = step == 1 ? b1 : b2;
      const double lk = kept.forward(b, {true, 99, step}).total_loss, lr = re.forward(b, {true, 99, step}).total_loss;
      EXPECT_EQ(lk, lr) << "step " << step;
      kept.backward(0.5f);
      re.backward(0.5f);
    }
    const size_t n = kept.table().total_elements();
    const std::vector<float> gk = testing::to_host(kept.grads(), n), gr = testing::to_host(re.grads(), n);
    size_t differ = 0;
    for (size_t i = 0; i < n; ++i) differ += gk[i] != gr[i];
    EXPECT_EQ(differ, 0u) << "gradient elements that differ of " << n;
    std::printf("  %s, %s: %zu of %zu gradient elements differ; kept copies %zu vs %zu bytes\n", recompute_name(mode),
                gemm_math_name(math), differ, n, kept_ops.kept_copy_bytes(), re_ops.kept_copy_bytes());
  }
}

}  // namespace
}  // namespace lansbert
