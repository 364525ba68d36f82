// ProfilingOps' FLOP and byte counts (bench --profile's columns and roofline floor): GEMM FLOPs
// summed over a whole training step equal the model's FLOP count (model/flops.h) that MFU is
// taken against; bytes follow the documented traffic model, conversions included, charged to
// the op that made them; expanding the hand-written attention into its ops changes no bits.
#include <gtest/gtest.h>

#include <cstring>
#include <vector>

#include "lansbert/backend/cpu_ops.h"
#include "lansbert/backend/profiling_ops.h"
#include "lansbert/backend/roofline.h"
#include "lansbert/model/bert_model.h"
#include "lansbert/model/flops.h"
#include "model_test_util.h"
#include "residual_layernorm_args.h"

namespace lansbert {
namespace {

double total(const ProfilingOps<float>& p, double ProfilingOps<float>::Entry::*field) {
  double sum = 0;
  for (const auto& [name, e] : p.entries()) sum += e.*field;
  return sum;
}

TEST(ProfilingTraffic, GemmFlopsAndBytesInFp32) {
  auto cpu = cpu::make_ops<float>();
  ProfilingOps<float> p(*cpu);
  const int m = 3, n = 5, k = 7;
  std::vector<float> a(m * k, 1.0f), b(k * n, 0.5f), c(m * n, 0.0f);
  p.gemm(Trans::kNo, Trans::kNo, m, n, k, 1.0f, a.data(), k, b.data(), n, 0.0f, c.data(), n);
  EXPECT_EQ(p.entries().at("gemm").flops, 2.0 * m * n * k);
  EXPECT_EQ(p.entries().at("gemm").bytes, 4.0 * (m * k + k * n) + 4.0 * m * n);
  // beta != 0 reads C as well.
  p.gemm(Trans::kNo, Trans::kNo, m, n, k, 1.0f, a.data(), k, b.data(), n, 1.0f, c.data(), n);
  EXPECT_EQ(p.entries().at("gemm").bytes, 2 * 4.0 * (m * k + k * n) + 3 * 4.0 * m * n);
  std::vector<float> g(n, 1.0f), beta(n, 0.0f), y(m * n), mean(m), rstd(m);
  p.layernorm_forward(c.data(), g.data(), beta.data(), y.data(), mean.data(), rstd.data(), m, n, 1e-5f);
  EXPECT_EQ(p.entries().at("layernorm_forward").flops, 0);
  EXPECT_EQ(p.entries().at("layernorm_forward").bytes, 4.0 * (2 * m * n + 2 * m + 2 * n));
}

// bf16 with cast reuse: operands are read at 2 bytes, each conversion costs 6 (4 read, 2
// written) and is charged to the op that triggered it; a kept operand is converted once.
TEST(ProfilingTraffic, ConversionsAreChargedToTheOpThatMadeThem) {
  auto cpu = cpu::make_ops<float>(GemmMath::kBf16, true);
  ProfilingOps<float> p(*cpu, nullptr, 2);
  const int m = 4, n = 6, k = 8;
  std::vector<float> a(m * k, 1.0f), b(k * n, 0.5f), c(m * n, 0.0f);
  p.gemm(Trans::kNo, Trans::kNo, m, n, k, 1.0f, a.data(), k, b.data(), n, 0.0f, c.data(), n);
  const double operands = 2.0 * (m * k + k * n), out = 4.0 * m * n;
  EXPECT_EQ(p.entries().at("gemm").bytes, operands + out + 6.0 * (m * k + k * n));
  p.keep_gemm_operand(a.data(), size_t(m) * k);
  EXPECT_EQ(p.entries().at("keep_gemm_operand").bytes, 6.0 * m * k);
  p.gemm(Trans::kNo, Trans::kNo, m, n, k, 1.0f, a.data(), k, b.data(), n, 0.0f, c.data(), n);
  EXPECT_EQ(p.entries().at("gemm").bytes, 2 * (operands + out) + 6.0 * (m * k + k * n) + 6.0 * k * n)
      << "the kept operand was charged again";
  p.drop_gemm_operand(a.data());
  // A *_kept op writes its 16-bit copy in the same pass (2 bytes), besides its fp32 output.
  std::vector<float> g(n, 1.0f), beta(n, 0.0f), y(m * n), mean(m), rstd(m);
  p.layernorm_forward_kept(c.data(), g.data(), beta.data(), y.data(), mean.data(), rstd.data(), m, n, 1e-5f);
  EXPECT_EQ(p.entries().at("layernorm_forward").bytes, 4.0 * (2 * m * n + 2 * m + 2 * n) + 2.0 * m * n);
  p.drop_gemm_operand(y.data());
  // The residual pass and the LayerNorm as one op: the two ops' bytes but the LayerNorm's read
  // of the sum (y and the residual read, y and out written), with out's copy.
  std::vector<float> bias(n, 0.5f), residual(m * n, 1.0f);
  p.residual_layernorm_forward(testing::residual_layernorm_args(c.data(), bias.data(), residual.data(), m, n, 0.0f,
                                                                RngKey{}, g.data(), beta.data(), y.data(), mean.data(),
                                                                rstd.data(), /*keep_out=*/true));
  EXPECT_EQ(p.entries().at("residual_layernorm_forward").bytes, 4.0 * (4 * m * n + 3 * n + 2 * m) + 2.0 * m * n);
  EXPECT_EQ(p.entries().count("bias_dropout_residual_forward"), 0u) << "charged once, to the fused op";
  p.drop_gemm_operand(y.data());
  // Its backward as one op: the LayerNorm backward's bytes (d(out) and the sum read, d(sum)
  // written; the statistics; gamma read, dgamma and dbeta updated), then d(y)'s copy and dbias
  // updated, without the dropout-bias backward's read of d(sum).
  std::vector<float> dout(m * n, 0.3f), dsum(m * n), dy(m * n), dgamma(n, 0.0f), dbeta(n, 0.0f), dbias(n, 0.0f);
  p.residual_layernorm_backward(testing::residual_layernorm_grad_args(dout.data(), c.data(), g.data(), mean.data(),
                                                                     rstd.data(), dsum.data(), dy.data(), dgamma.data(),
                                                                     dbeta.data(), dbias.data(), m, n));
  EXPECT_EQ(p.entries().at("residual_layernorm_backward").bytes,
            4.0 * (3 * m * n + 2 * m + 5 * n) + 2.0 * m * n + 8.0 * n);
  EXPECT_EQ(p.entries().count("layernorm_backward") + p.entries().count("dropout_bias_backward"), 0u)
      << "charged once, to the fused op";
  p.drop_gemm_operand(dy.data());
  // An output only GEMMs read is written as its copy alone where the backend says so.
  ASSERT_TRUE(cpu->kept_outputs_unwritten());
  std::vector<float> pre(m * n, 0.1f), act(m * n);
  p.gelu_forward_kept(pre.data(), act.data(), size_t(m) * n);
  EXPECT_EQ(p.entries().at("gelu_forward").bytes, 4.0 * m * n + 2.0 * m * n);
  p.drop_gemm_operand(act.data());
}

// 16-bit FFN activations: the pre-activation costs 2 bytes where it is written and read, and
// d(act) 2 where it is read from its copy; the rows are those of the ops they replace.
TEST(ProfilingTraffic, HalfFfnActivationsAreCountedAtTwoBytes) {
  auto cpu = cpu::make_ops<float>(GemmMath::kBf16, true);
  ProfilingOps<float> p(*cpu, nullptr, 2);
  const int m = 4, n = 6, k = 8;
  const double mn = double(m) * n;
  std::vector<float> a(m * k, 1.0f), b(n * k, 0.5f), bias(n, 0.1f), scratch(m * n), act(m * n), d(m * n, 0.2f);
  std::vector<float> db(n, 0.0f);
  std::vector<uint16_t> pre(m * n);
  p.keep_gemm_operand(a.data(), size_t(m) * k);
  p.keep_gemm_operand(b.data(), size_t(n) * k);
  p.gemm_bias_half(Trans::kNo, Trans::kYes, m, n, k, a.data(), k, b.data(), k, bias.data(), scratch.data(), pre.data());
  EXPECT_EQ(p.entries().at("gemm_bias").flops, 2.0 * m * n * k);
  EXPECT_EQ(p.entries().at("gemm_bias").bytes, 2.0 * (m * k + k * n) + 2.0 * mn + 4.0 * n);
  p.gelu_forward_half_kept(pre.data(), act.data(), size_t(m) * n);
  EXPECT_EQ(p.entries().at("gelu_forward").bytes, 2.0 * mn + 2.0 * mn) << "16-bit read, copy written";
  p.keep_gemm_operand(d.data(), size_t(m) * n);  // d(act) as its GEMM's kept output
  const double before = p.entries().at("keep_gemm_operand").bytes;
  p.bias_gelu_backward_half_kept(d.data(), pre.data(), d.data(), db.data(), m, n);
  EXPECT_EQ(p.entries().at("bias_gelu_backward").bytes, (2.0 + 2.0 + 2.0) * mn + 8.0 * n);
  EXPECT_EQ(p.entries().at("keep_gemm_operand").bytes, before) << "the backward converted something";
  // A kept gradient's bias sums read its copy: 2 bytes an element.
  std::vector<float> db2(n, 0.0f);
  p.bias_add_backward_of_kept(d.data(), db2.data(), m, n);
  EXPECT_EQ(p.entries().at("bias_add_backward").bytes, 2.0 * mn + 8.0 * n);
  for (const float* x : {a.data(), b.data(), act.data(), d.data()}) p.drop_gemm_operand(x);
}

// 16-bit LayerNorm input sums held as the dense output's copy (sum_copy_only): the pass reads
// y and writes the sum at 2 bytes each, the backward reads the sum at 2.
TEST(ProfilingTraffic, SixteenBitSumsAreCountedAtTwoBytes) {
  auto cpu = cpu::make_ops<float>(GemmMath::kBf16, true);
  ProfilingOps<float> p(*cpu, nullptr, 2);
  const int m = 4, n = 8, k = 8;
  const double mn = double(m) * n;
  std::vector<float> a(m * k, 1.0f), w(k * n, 0.5f), y(m * n), bias(n, 0.1f), residual(m * n, 1.0f);
  std::vector<float> g(n, 1.0f), beta(n, 0.0f), out(m * n), mean(m), rstd(m);
  p.gemm_kept(Trans::kNo, Trans::kNo, m, n, k, a.data(), k, w.data(), n, y.data(), n);
  auto f = testing::residual_layernorm_args(y.data(), bias.data(), residual.data(), m, n, 0.0f, RngKey{}, g.data(),
                                            beta.data(), out.data(), mean.data(), rstd.data());
  f.sum_half = f.sum_copy_only = true;
  p.residual_layernorm_forward(f);
  EXPECT_EQ(p.entries().at("residual_layernorm_forward").bytes, (2.0 + 2.0 + 4.0 + 4.0) * mn + 4.0 * (3 * n + 2 * m));
  std::vector<float> dout(m * n, 0.3f), dsum(m * n), dy(m * n), dgamma(n, 0.0f), dbeta(n, 0.0f), dbias(n, 0.0f);
  auto b = testing::residual_layernorm_grad_args(dout.data(), y.data(), g.data(), mean.data(), rstd.data(), dsum.data(),
                                                 dy.data(), dgamma.data(), dbeta.data(), dbias.data(), m, n);
  b.sum_copy_only = true;
  p.residual_layernorm_backward(b);
  // d(out) read, d(sum) written, the sum read from its copy, d(y)'s copy written.
  EXPECT_EQ(p.entries().at("residual_layernorm_backward").bytes,
            (4.0 + 4.0 + 2.0 + 2.0) * mn + 4.0 * (2 * m + 5 * n) + 8.0 * n);
  for (const float* x : {a.data(), w.data(), y.data(), dy.data()}) p.drop_gemm_operand(x);
}

// The 16-bit gradient stream held as copies (grad_copy_only): the block end reads d(out) and
// writes d(sum) at 2 bytes each (8 an element with the sum and d(y), where the fp32 stream moves
// 12); the layer input's GEMM reads and writes d(sum)'s copy at 2 bytes each; the stream's end
// reads the copy and writes fp32.
TEST(ProfilingTraffic, SixteenBitGradientStreamIsCountedAtTwoBytes) {
  auto cpu = cpu::make_ops<float>(GemmMath::kBf16, true);
  ProfilingOps<float> p(*cpu, nullptr, 2);
  const int m = 4, n = 8, k = 8;
  const double mn = double(m) * n;
  std::vector<float> a(m * k, 1.0f), w(k * n, 0.5f), y(m * n), g(n, 1.0f), mean(m, 0.0f), rstd(m, 1.0f);
  std::vector<float> dout(m * n, 0.3f), dsum(m * n), dy(m * n), dgamma(n, 0.0f), dbeta(n, 0.0f), dbias(n, 0.0f);
  p.gemm_kept(Trans::kNo, Trans::kNo, m, n, k, a.data(), k, w.data(), n, y.data(), n);
  p.keep_gemm_operand(dout.data(), dout.size());
  auto b = testing::residual_layernorm_grad_args(dout.data(), y.data(), g.data(), mean.data(), rstd.data(), dsum.data(),
                                                 dy.data(), dgamma.data(), dbeta.data(), dbias.data(), m, n);
  b.sum_copy_only = b.grad_half = b.grad_copy_only = true;
  p.residual_layernorm_backward(b);
  EXPECT_EQ(p.entries().at("residual_layernorm_backward").bytes,
            (2.0 + 2.0 + 2.0 + 2.0) * mn + 4.0 * (2 * m + 5 * n) + 8.0 * n);
  const double gemm_before = p.entries().at("gemm").bytes;
  p.gemm_accumulate_kept(Trans::kNo, Trans::kNo, m, n, k, a.data(), k, w.data(), n, dsum.data(), n);
  // A and B (not kept: cast for this GEMM, 6 bytes an element) read at 2, C's copy at 2 + 2.
  EXPECT_EQ(p.entries().at("gemm").bytes - gemm_before, (6.0 + 2.0) * (m * k + k * n) + 4.0 * mn);
  p.widen_kept(dsum.data(), dsum.size());
  EXPECT_EQ(p.entries().at("gradient_stream_ends").bytes, 6.0 * mn);
  for (const float* x : {a.data(), w.data(), y.data(), dy.data(), dout.data(), dsum.data()}) p.drop_gemm_operand(x);
}

// A training step's GEMM FLOPs, summed over the profile's rows, are the FLOPs MFU counts;
// with the hand-written attention expanded or timed as one entry point (forward two GEMMs,
// backward four); the expansion gives the same loss and gradients, bit for bit.
TEST(ProfilingTraffic, StepGemmFlopsAreTheModelsFlopCount) {
  BertConfig cfg;
  ASSERT_TRUE(bert_preset("bert-tiny", &cfg).is_ok());
  const int B = 2, S = 16, P = 3;
  const Batch batch = testing::random_batch(B, S, P, cfg.vocab_size, 4);
  auto cpu = cpu::make_ops<float>();
  ProfilingOps<float> whole(*cpu), expanded(*cpu);
  expanded.expand_native_attention(true);
  BertModel<float> a(cfg, whole, {B, S, P}), b(cfg, expanded, {B, S, P});
  a.init_params(9);
  b.init_params(9);
  EXPECT_EQ(a.forward(batch, {true, 3, 4}).total_loss, b.forward(batch, {true, 3, 4}).total_loss);
  a.zero_grads();
  b.zero_grads();
  a.backward(1.0f);
  b.backward(1.0f);
  EXPECT_EQ(0, std::memcmp(a.grads(), b.grads(), a.table().total_elements() * sizeof(float)));
  const double want = bert_train_flops(cfg, B, S, P);
  EXPECT_DOUBLE_EQ(total(whole, &ProfilingOps<float>::Entry::flops), want);
  EXPECT_DOUBLE_EQ(total(expanded, &ProfilingOps<float>::Entry::flops), want);
  EXPECT_EQ(whole.entries().count("gemm_batched"), 0u);
  EXPECT_EQ(expanded.entries().count("attention_forward"), 0u);
  EXPECT_EQ(expanded.entries().at("gemm_batched").calls, 6 * cfg.layers);  // 2 forward, 4 backward
  // The entry point timed whole is charged the CUDA fused path's traffic (profiling_ops.h):
  // 32 bytes per [B*S, H] element forward, 82 backward, row statistics and the keep mask.
  const double NH = double(B) * S * cfg.hidden, rows = double(B) * cfg.heads * S, mask = 4.0 * rows * S;
  ASSERT_GT(cfg.attention_dropout, 0.0f);
  EXPECT_DOUBLE_EQ(whole.entries().at("attention_forward").bytes, cfg.layers * (32 * NH + 4 * rows + mask));
  EXPECT_DOUBLE_EQ(whole.entries().at("attention_backward").bytes, cfg.layers * (82 * NH + 8 * rows + mask));
  EXPECT_GT(total(expanded, &ProfilingOps<float>::Entry::bytes), 0);
}

TEST(Roofline, EachOpTakesTheLongerOfItsFlopsAndItsBytes) {
  const Roofline r{100e12, 2e12};
  EXPECT_DOUBLE_EQ(r.floor_seconds(1e12, 1e9), 0.01);  // FLOP-bound
  EXPECT_DOUBLE_EQ(r.floor_seconds(1e9, 1e12), 0.5);   // memory-bound
  EXPECT_TRUE(r.compute_bound(1e12, 1e9));
  EXPECT_FALSE(r.compute_bound(1e9, 1e12));
  EXPECT_EQ(Roofline{}.floor_seconds(1e12, 1e12), 0);  // no device: no floor
}

// The floor is taken per call: a row holding a FLOP-bound GEMM and a memory-bound one costs
// the sum of their floors, more than the floor of the row's summed FLOPs and bytes.
TEST(Roofline, FloorsAreTakenPerCallAndSplitByBound) {
  auto cpu = cpu::make_ops<float>();
  ProfilingOps<float> p(*cpu);
  const Roofline r{1e9, 1e9};  // one FLOP per byte: a GEMM is FLOP-bound when 2mnk > 4(mk+kn+mn)
  p.set_roofline(r);
  std::vector<float> a(64 * 64, 1.0f), b(64 * 64, 1.0f), c(64 * 64), row(64), one(1, 1.0f);
  p.gemm(Trans::kNo, Trans::kNo, 64, 64, 64, 1.0f, a.data(), 64, b.data(), 64, 0.0f, c.data(), 64);  // FLOP-bound
  p.gemm(Trans::kNo, Trans::kNo, 64, 1, 1, 1.0f, a.data(), 1, one.data(), 1, 0.0f, row.data(), 1);   // memory-bound
  const double big_flops = 2.0 * 64 * 64 * 64, big_bytes = 4.0 * 3 * 64 * 64;
  const double small_flops = 2.0 * 64, small_bytes = 4.0 * (64 + 1 + 64);
  const ProfilingOps<float>::Entry& e = p.entries().at("gemm");
  EXPECT_DOUBLE_EQ(e.floor_seconds, (big_flops + small_bytes) / 1e9);
  EXPECT_GT(e.floor_seconds, r.floor_seconds(big_flops + small_flops, big_bytes + small_bytes));
  EXPECT_DOUBLE_EQ(e.floor_compute_seconds, big_flops / 1e9);
  std::vector<float> x(1000, 1.0f);
  p.accumulate(x.data(), x.data(), 500);
  const RooflineFloor f = roofline_floor(p.entries(), 2);  // per step, over 2 steps
  EXPECT_DOUBLE_EQ(f.compute_bound_s, big_flops / 1e9 / 2);
  const double memory = (small_bytes + 4.0 * 3 * 500) / 1e9 / 2;
  EXPECT_NEAR(f.memory_bound_s, memory, 1e-12 * memory);  // a difference of sums: not exact
}

}  // namespace
}  // namespace lansbert
