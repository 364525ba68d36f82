// The device twins of tests/kernels/half_activations_test.cc and tests/model/half_activations_test.cc:
// CudaOps' 16-bit FFN activation ops (Ops::gemm_bias_half, gelu_forward_half_kept,
// bias_gelu_backward_half_kept) against the CPU's on the same inputs, with cast reuse (copies
// kept, fp32 outputs unwritten) and without, and the bias sums of a kept 16-bit gradient; then
// a bert-tiny step with 16-bit activations against the CPU twin, with the hand-written and the
// flash attention, and with the tanh GELU in the GEMMs' epilogues. Skipped without a device.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <string>

#include "../model/model_test_util.h"
#include "gpu_test_util.h"
#include "lansbert/backend/cpu_ops.h"
#include "lansbert/model/bert_model.h"

namespace lansbert {
namespace {

using testing::random_vector;
using testing::to_device;
using testing::to_host;
using testing::widen;

TEST(GpuHalfActivations, OpsMatchTheCpuTwin) {
  LB_REQUIRE_GPU();
  const int rows = 96, k = 64, cols = 160, out = 24;
  const size_t n = size_t(rows) * cols;
  const auto x = random_vector(size_t(rows) * k, 81), w = random_vector(size_t(cols) * k, 82);
  const auto bias = random_vector(cols, 83), dact = random_vector(n, 84), w2 = random_vector(size_t(cols) * out, 85);
  for (GemmMath math : {GemmMath::kBf16, GemmMath::kFp16})
    for (bool reuse : {true, false}) {
      const std::string what = std::string(gemm_math_name(math)) + (reuse ? " with cast reuse" : " without");
      const kern::HalfFormat f = gemm_half_format(math);
      cuda::OpsOptions oo;
      oo.math = math;
      oo.reuse_casts = reuse;
      auto gpu = cuda::make_ops(oo);
      auto cpu = cpu::make_ops<float>(math, reuse);
      ASSERT_TRUE(gpu->half_activations());
      // The GEMM's 16-bit output: the same operand values, fp32 sums in another order, so the
      // rounded results agree to within one 16-bit step.
      auto xd = to_device(x), wd = to_device(w), bd = to_device(bias);
      auto scratch_d = to_device(std::vector<float>(n, 0.f));
      Buffer<uint16_t> pre_d(n, cuda::device_allocator());
      std::vector<float> scratch(n);
      std::vector<uint16_t> pre(n);
      gpu->gemm_bias_half(Trans::kNo, Trans::kYes, rows, cols, k, xd.data(), k, wd.data(), k, bd.data(),
                          scratch_d.data(), pre_d.data());
      cpu->gemm_bias_half(Trans::kNo, Trans::kYes, rows, cols, k, x.data(), k, w.data(), k, bias.data(),
                          scratch.data(), pre.data());
      const std::vector<uint16_t> pre_gpu = to_host(pre_d);
      testing::expect_close(what + " gemm_bias_half", widen(pre_gpu, f), widen(pre, f),
                            f == kern::HalfFormat::kBf16 ? 8e-3 : 1e-3);
      // From here on both sides read the CPU's pre-activation, so the element-wise ops are
      // compared on equal inputs.
      auto pre_in = to_device(pre);
      auto act_d = to_device(std::vector<float>(n, std::numeric_limits<float>::quiet_NaN()));
      std::vector<float> act(n, std::numeric_limits<float>::quiet_NaN());
      gpu->gelu_forward_half_kept(pre_in.data(), act_d.data(), n);
      cpu->gelu_forward_half_kept(pre.data(), act.data(), n);
      auto w2d = to_device(w2);
      auto y_d = to_device(std::vector<float>(size_t(rows) * out, 0.f));
      std::vector<float> y(size_t(rows) * out);
      gpu->gemm(Trans::kNo, Trans::kNo, rows, out, cols, 1.f, act_d.data(), cols, w2d.data(), out, 0.f, y_d.data(), out);
      cpu->gemm(Trans::kNo, Trans::kNo, rows, out, cols, 1.f, act.data(), cols, w2.data(), out, 0.f, y.data(), out);
      testing::expect_close(what + " gelu_forward_half_kept, read by a GEMM", to_host(y_d), y, 1e-5);
      if (!reuse) testing::expect_close(what + " gelu_forward_half_kept", to_host(act_d), act, 1e-6);
      gpu->drop_gemm_operand(act_d.data());
      cpu->drop_gemm_operand(act.data());
      // The backward, d(act) kept (cast here: the values the model's kept GEMM output holds).
      auto d_d = to_device(dact);
      std::vector<float> d = dact;
      gpu->keep_gemm_operand(d_d.data(), n);
      cpu->keep_gemm_operand(d.data(), n);
      auto db_d = to_device(std::vector<float>(cols, 0.5f));
      std::vector<float> db(cols, 0.5f);
      gpu->bias_gelu_backward_half_kept(d_d.data(), pre_in.data(), d_d.data(), db_d.data(), rows, cols);
      cpu->bias_gelu_backward_half_kept(d.data(), pre.data(), d.data(), db.data(), rows, cols);
      testing::expect_close(what + " bias_gelu_backward_half_kept d(bias)", to_host(db_d), db, 1e-5);
      auto z_d = to_device(std::vector<float>(size_t(rows) * out, 0.f));
      std::vector<float> z(size_t(rows) * out);
      gpu->gemm(Trans::kNo, Trans::kNo, rows, out, cols, 1.f, d_d.data(), cols, w2d.data(), out, 0.f, z_d.data(), out);
      cpu->gemm(Trans::kNo, Trans::kNo, rows, out, cols, 1.f, d.data(), cols, w2.data(), out, 0.f, z.data(), out);
      testing::expect_close(what + " bias_gelu_backward_half_kept d(pre), read by a GEMM", to_host(z_d), z, 1e-5);
      gpu->drop_gemm_operand(d_d.data());
      cpu->drop_gemm_operand(d.data());
      // The bias sums of a kept gradient at its 16-bit rounding (d(q, k, v)'s).
      auto g_d = to_device(dact);
      gpu->keep_gemm_operand(g_d.data(), n);
      cpu->keep_gemm_operand(const_cast<float*>(dact.data()), n);
      auto sb_d = to_device(std::vector<float>(cols, 0.f));
      std::vector<float> sb(cols, 0.f);
      gpu->bias_add_backward_of_kept(g_d.data(), sb_d.data(), rows, cols);
      cpu->bias_add_backward_of_kept(dact.data(), sb.data(), rows, cols);
      testing::expect_close(what + " bias_add_backward_of_kept", to_host(sb_d), sb, 1e-5);
      gpu->drop_gemm_operand(g_d.data());
      cpu->drop_gemm_operand(dact.data());
    }
}

// bert-tiny, bf16 GEMMs with cast reuse and 16-bit activations: a training micro-step on
// the device against the CPU twin (the emulation of the same roundings). The sums run in other
// orders, and a last-bit difference before a 16-bit rounding moves that rounding a whole
// step, so the bounds are the 16-bit paths' (docs/cuda.md), not fp32's 1e-4.
// With the flash attention (bert-tiny's head_dim is 64) d(q, k, v) is kept in 16 bits too.
// With model.hidden_act: gelu_tanh the device's FFN GEMMs take the GELU in cuBLASLt's epilogues
// (gelu_epilogue_test.cc), and the CPU runs the unfused ops: the same bounds hold. And in fp16
// with the flash attention (the V100's format: the kernels' fp16 instances, the gradient
// stream's included).
TEST(GpuHalfActivations, TinyStepMatchesTheCpuTwin) {
  LB_REQUIRE_GPU();
  for (int variant = 0; variant < 4; ++variant) {
  const bool fp16 = variant == 3, flash = variant == 1 || fp16, tanh = variant == 2;
  SCOPED_TRACE(fp16 ? "fp16, flash attention" : flash ? "flash attention"
               : tanh ? "hand-written attention, gelu_tanh" : "hand-written attention");
  const GemmMath math = fp16 ? GemmMath::kFp16 : GemmMath::kBf16;
  BertConfig cfg;
  ASSERT_TRUE(bert_preset("bert-tiny", &cfg).is_ok());
  if (tanh) cfg.hidden_act = kern::GeluForm::kTanh;
  const int B = 4, S = 64, P = 10;
  cuda::OpsOptions oo;
  oo.math = math;
  oo.attention = flash ? AttentionMode::kFlash : AttentionMode::kNative;
  auto gpu_ops = cuda::make_ops(oo);
  auto cpu_ops = cpu::make_ops<float>(math, true, oo.attention);
  ASSERT_EQ(gpu_ops->attention_keeps_input_gradients(), flash);
  const ModelLimits lim{B, S, P, Recompute::kNone, flash, true};
  BertModel<float> gm(cfg, *gpu_ops, lim), cm(cfg, *cpu_ops, lim);
  gm.init_params(42);
  cm.init_params(42);
  const Batch batch = testing::random_batch(B, S, P, cfg.vocab_size, 7);
  const double lg = gm.forward(batch, {true, 1234, 3}).total_loss, lc = cm.forward(batch, {true, 1234, 3}).total_loss;
  std::printf("  loss cpu %.8f gpu %.8f\n", lc, lg);
  EXPECT_NEAR(lg, lc, 1e-3 * std::fabs(lc));
  gm.zero_grads();
  cm.zero_grads();
  gm.backward(1.0f);
  cm.backward(1.0f);
  const size_t total = cm.table().total_elements();
  const std::vector<float> g = to_host(gm.grads(), total);
  double diff = 0, ref = 0;
  for (size_t i = 0; i < total; ++i) {
    diff += (double(g[i]) - cm.grads()[i]) * (double(g[i]) - cm.grads()[i]);
    ref += double(cm.grads()[i]) * cm.grads()[i];
  }
  const double rel = std::sqrt(diff / ref);
  std::printf("  gradients: %.3e relative (norm) between the device and the CPU twin\n", rel);
  EXPECT_LT(rel, 1e-2);
  }
}

}  // namespace
}  // namespace lansbert
