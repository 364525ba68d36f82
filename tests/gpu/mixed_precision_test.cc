// Mixed precision on the device against CPU references: CudaOps in bf16/fp16 GemmMath
// against CpuOps emulating the same mode (the bias epilogue: gemm_bias_test.cc); the bf16
// cast; the device unscale-and-check against LossScaler's; and the bf16 weight copy the
// device optimizer writes. Skipped without a device.
#include <gtest/gtest.h>

#include "attention_batch.h"

#include <limits>

#include "gpu_test_util.h"
#include "lansbert/backend/cpu_ops.h"
#include "lansbert/kernels/half.h"
#include "lansbert/model/bert_config.h"
#include "lansbert/optim/loss_scaler.h"
#include "lansbert/optim/noise_scale.h"
#include "lansbert/optim/optimizer.h"

namespace lansbert {
namespace {

std::vector<uint16_t> bf16_of(const std::vector<float>& x) {
  std::vector<uint16_t> h(x.size());
  for (size_t i = 0; i < x.size(); ++i) h[i] = kern::float_to_bf16(x[i]);
  return h;
}

TEST(GpuMixed, Bf16CastMatchesSharedRounding) {
  LB_REQUIRE_GPU();
  auto x = testing::random_vector(5001, 31, 100.f);
  x[7] = std::numeric_limits<float>::infinity();
  x[8] = std::numeric_limits<float>::quiet_NaN();
  auto xd = testing::to_device(x);
  Buffer<uint16_t> hd(x.size(), cuda::device_allocator());
  cuda::cast_to_bf16(xd.data(), hd.data(), x.size());
  EXPECT_EQ(testing::to_host(hd), bf16_of(x));
}

// CudaOps in bf16/fp16 mode (cast kernels + cuBLAS 16-bit GEMM) against CpuOps in the same
// mode (rounded operands + sgemm): same operand values, fp32 sums in another order, so 1e-5.
// With cast_in_gemm cuBLAS converts the fp32 operands itself (32F_FAST_16BF/16F, which allow
// bf16/fp16 or TF32); if it rounds to nearest 16-bit as the cast kernels do, the printed error
// stays at the 1e-6 level, ~1e-3 suggests TF32; the bound admits either (an ulp of bf16 is
// 2^-8 relative, of fp16 2^-11).
TEST(GpuMixed, HalfGemmOpsMatchCpuEmulation) {
  LB_REQUIRE_GPU();
  for (bool cast_in_gemm : {false, true})
  for (GemmMath math : {GemmMath::kBf16, GemmMath::kFp16}) {
    cuda::OpsOptions oo;
    oo.math = math;
    oo.cast_in_gemm = cast_in_gemm;
    const double tol = cast_in_gemm ? 1e-2 : 1e-5;
    const std::string mode = std::string(gemm_math_name(math)) + (cast_in_gemm ? " in-gemm cast" : "");
    auto gpu = cuda::make_ops(oo);
    auto cpu = cpu::make_ops<float>(math);
    for (Trans ta : {Trans::kNo, Trans::kYes})
      for (Trans tb : {Trans::kNo, Trans::kYes}) {
        const int m = 70, n = 33, k = 190;
        const int lda = ta == Trans::kNo ? k : m, ldb = tb == Trans::kNo ? n : k;
        const auto a = testing::random_vector(size_t(m) * k, 40, 3.f);
        const auto b = testing::random_vector(size_t(k) * n, 41, 3.f);
        std::vector<float> c = testing::random_vector(size_t(m) * n, 42);
        auto ad = testing::to_device(a), bd = testing::to_device(b), cd = testing::to_device(c);
        cpu->gemm(ta, tb, m, n, k, 0.5f, a.data(), lda, b.data(), ldb, 1.f, c.data(), n);
        gpu->gemm(ta, tb, m, n, k, 0.5f, ad.data(), lda, bd.data(), ldb, 1.f, cd.data(), n);
        testing::expect_close(mode + " gemm ta=" + std::to_string(int(ta)) + " tb=" + std::to_string(int(tb)),
                              testing::to_host(cd), c, tol);
      }
    // Attention layout: Q K^T per (batch, head), heads read in place. S 40: one pointer-array
    // call; S 17: blocks of 17 x 17 floats are not 16-byte aligned, so one strided call per
    // sequence (cuda_gemm.cu batched_ex).
    for (const int S : {40, 17}) {
      const int B = 3, A = 4, D = 16, H = A * D;
      const auto q = testing::random_vector(size_t(B) * S * H, 43), kk = testing::random_vector(size_t(B) * S * H, 44);
      const GemmBatch g = testing::attention_scores_batch(B, A, S, D);
      std::vector<float> sc(size_t(B) * A * S * S, 0.f);
      auto qd = testing::to_device(q), kd = testing::to_device(kk), scd = testing::to_device(sc);
      cpu->gemm_batched(Trans::kNo, Trans::kYes, S, S, D, 0.25f, q.data(), H, kk.data(), H, 0.f, sc.data(), S, g);
      gpu->gemm_batched(Trans::kNo, Trans::kYes, S, S, D, 0.25f, qd.data(), H, kd.data(), H, 0.f, scd.data(), S, g);
      testing::expect_close(mode + " batched attention scores, S " + std::to_string(S), testing::to_host(scd), sc, tol);
    }
  }
}

// A kept span (Ops::keep_gemm_operand) is cast once and read by both GEMMs of a backward:
// the same bits as casting at each use, and the conversion counter shows the one cast.
TEST(GpuMixed, HeldOperandIsCastOnce) {
  LB_REQUIRE_GPU();
  for (GemmMath math : {GemmMath::kBf16, GemmMath::kFp16}) {
    cuda::OpsOptions oo;
    oo.math = math;
    auto plain = cuda::make_ops(oo), held = cuda::make_ops(oo);
    const int n = 96, in = 64, out = 80;
    const auto dy = testing::random_vector(size_t(n) * out, 50), x = testing::random_vector(size_t(n) * in, 51),
               w = testing::random_vector(size_t(out) * in, 52);
    auto dyd = testing::to_device(dy), xd = testing::to_device(x), wd = testing::to_device(w);
    auto run = [&](Ops<float>& ops, bool hold) {
      auto dx = testing::to_device(std::vector<float>(size_t(n) * in, 0.f));
      auto dw = testing::to_device(std::vector<float>(size_t(out) * in, 0.f));
      if (hold) ops.keep_gemm_operand(dyd.data(), dy.size());
      ops.gemm(Trans::kNo, Trans::kNo, n, in, out, 1.f, dyd.data(), out, wd.data(), in, 0.f, dx.data(), in);
      ops.gemm(Trans::kYes, Trans::kNo, out, in, n, 1.f, dyd.data(), out, xd.data(), in, 1.f, dw.data(), in);
      if (hold) ops.drop_gemm_operand(dyd.data());
      return std::pair{testing::to_host(dx), testing::to_host(dw)};
    };
    const auto want = run(*plain, false), got = run(*held, true);
    EXPECT_EQ(want.first, got.first) << gemm_math_name(math);
    EXPECT_EQ(want.second, got.second) << gemm_math_name(math);
    EXPECT_EQ(plain->gemm_operand_conversions(), size_t(2 * n * out + out * in + n * in));
    EXPECT_EQ(held->gemm_operand_conversions(), size_t(n * out + out * in + n * in));
  }
}

// The device twin of GemmOperandHold.ConvertedSpanIsReadWithoutRounding: a weight kept with
// its 16-bit copy (as the optimizer writes it) is read in place, nothing is cast for it, and
// the products equal those of casting it; a copy of the other format is ignored.
TEST(GpuMixed, ConvertedOperandIsReadInPlace) {
  LB_REQUIRE_GPU();
  for (GemmMath math : {GemmMath::kBf16, GemmMath::kFp16}) {
    cuda::OpsOptions oo;
    oo.math = math;
    auto plain = cuda::make_ops(oo), ops = cuda::make_ops(oo);
    const int m = 48, k = 64, n = 40;
    const auto x = testing::random_vector(size_t(m) * k, 53), w = testing::random_vector(size_t(k) * n, 54);
    const kern::HalfFormat f = gemm_half_format(math);
    std::vector<uint16_t> wh(w.size()), other(w.size());
    for (size_t i = 0; i < w.size(); ++i) {
      wh[i] = kern::float_to_half(w[i], f);
      other[i] = 0;  // zeros in the other format: read, they would zero the product
    }
    auto xd = testing::to_device(x), wd = testing::to_device(w);
    auto whd = testing::to_device(wh), otherd = testing::to_device(other);
    auto run = [&](Ops<float>& o) {
      auto y = testing::to_device(std::vector<float>(size_t(m) * n, 0.f));
      o.gemm(Trans::kNo, Trans::kNo, m, n, k, 1.f, xd.data(), k, wd.data(), n, 0.f, y.data(), n);
      return testing::to_host(y);
    };
    const auto want = run(*plain);
    ops->keep_converted_gemm_operand(wd.data(), w.size(), whd.data(), f);
    EXPECT_EQ(run(*ops), want) << gemm_math_name(math);
    EXPECT_EQ(ops->gemm_operand_conversions(), size_t(m) * k) << "the kept weight was cast";
    const kern::HalfFormat g = f == kern::HalfFormat::kBf16 ? kern::HalfFormat::kFp16 : kern::HalfFormat::kBf16;
    ops->keep_converted_gemm_operand(wd.data(), w.size(), otherd.data(), g);
    EXPECT_EQ(run(*ops), want) << gemm_math_name(math) << ": a copy in the other format was read";
    ops->drop_gemm_operand(wd.data());
  }
}

// fp16 with cast_in_gemm: the dynamic loss scaler finds an fp16 overflow through the inf it
// leaves in the GEMM output (the cast kernel rounds 1e5 to inf, as a V100's tensor cores
// would). cuBLAS's rounding inside 32F_FAST_16F is unspecified, and the header says the type
// also allows TF32. Acceptable: a non-finite output (overflow seen) or the product at TF32
// precision (no overflow happened). A clamp to 65504 would be a silently wrong gradient.
TEST(GpuMixed, Fp16CastInGemmOverflowIsNotClampedSilently) {
  LB_REQUIRE_GPU();
  cuda::OpsOptions oo;
  oo.math = GemmMath::kFp16;
  oo.cast_in_gemm = true;
  auto gpu = cuda::make_ops(oo);
  const int m = 32, n = 32, k = 32;
  std::vector<float> a(size_t(m) * k, 0.f), b(size_t(k) * n, 0.f), c(size_t(m) * n, 0.f);
  for (int i = 0; i < k; ++i) {
    a[size_t(i) * k + i] = 1e5f;  // A = 1e5 I, past fp16's 65504
    b[size_t(i) * n + i] = 1.f;   // B = I
  }
  auto ad = testing::to_device(a), bd = testing::to_device(b), cd = testing::to_device(c);
  gpu->gemm(Trans::kNo, Trans::kNo, m, n, k, 1.f, ad.data(), k, bd.data(), n, 0.f, cd.data(), n);
  const auto got = testing::to_host(cd);
  for (int i = 0; i < m; ++i) {
    const float d = got[size_t(i) * n + i];
    if (std::isfinite(d)) {
      EXPECT_NEAR(d, 1e5f, 1e5f / 1024) << "diagonal " << i << ": clamped?";
    }
  }
}

TEST(GpuMixed, UnscaleAndCheckMatchesLossScaler) {
  LB_REQUIRE_GPU();
  BertConfig cfg;
  ASSERT_TRUE(bert_preset("bert-tiny", &cfg).is_ok());
  const ParamTable table = make_bert_param_table(cfg);
  auto g = testing::random_vector(table.total_elements(), 35, 1000.f);
  g[table[3].offset + 2] = std::numeric_limits<float>::infinity();
  g[table[9].offset] = std::numeric_limits<float>::quiet_NaN();
  // Two in the sixth 16384-element chunk of the word embeddings (the device counts per chunk
  // and adds the counts to the chunk's block).
  ASSERT_GT(table[0].numel, 6u * 16384);
  g[table[0].offset + 5 * 16384 + 7] = -std::numeric_limits<float>::infinity();
  g[table[0].offset + 5 * 16384 + 9] = std::numeric_limits<float>::quiet_NaN();
  auto gd = testing::to_device(g);
  LossScalerConfig lc;
  lc.mode = LossScaleMode::kDynamic;
  LossScaler scaler(lc);
  const GradCheck want = scaler.unscale_and_check(table, g.data());
  const GradCheck got = cuda::unscale_and_check(table, gd.data(), scaler.scale());
  EXPECT_EQ(got.finite, want.finite);
  EXPECT_EQ(got.nonfinite_values, want.nonfinite_values);
  EXPECT_EQ(got.nonfinite_blocks, want.nonfinite_blocks);
  testing::expect_close("unscaled gradients", testing::to_host(gd), g, 0.0);
  // The device keeps its chunk list and per-block counters between calls (one check per
  // update): a second call on the same table counts afresh (counters reset, not added to),
  // and a different table gets chunks of its own (stale ones would read past its buffer).
  const GradCheck again = cuda::unscale_and_check(table, gd.data(), 1.0);
  EXPECT_EQ(again.nonfinite_values, want.nonfinite_values);
  EXPECT_EQ(again.nonfinite_blocks, want.nonfinite_blocks);
  ParamTable other;
  other.add("a", {100}, ParamRole::kWeight);
  other.add("b", {40000}, ParamRole::kWeight);  // three chunks
  other.add("c", {7}, ParamRole::kBias);
  std::vector<float> h(other.total_elements(), 1.f);
  h[other[1].offset + 39999] = std::numeric_limits<float>::quiet_NaN();
  h[other[2].offset + 3] = std::numeric_limits<float>::infinity();
  auto hd = testing::to_device(h);
  const GradCheck small = cuda::unscale_and_check(other, hd.data(), 1.0);
  EXPECT_FALSE(small.finite);
  EXPECT_EQ(small.nonfinite_values, 2u);
  EXPECT_EQ(small.nonfinite_blocks, (std::vector<size_t>{1, 2}));
  // A sharded update's slice [begin, end), cut inside blocks: only it is unscaled and
  // counted, as LossScaler does with the same range.
  const size_t begin = other[1].offset + 20000, end = other[2].offset + 2;  // excludes c[3]
  std::vector<float> s(other.total_elements(), 4.f);
  s[other[0].offset + 5] = std::numeric_limits<float>::infinity();     // before the slice
  s[other[1].offset + 30000] = std::numeric_limits<float>::quiet_NaN();  // inside
  s[other[2].offset + 3] = std::numeric_limits<float>::infinity();     // after
  auto sd = testing::to_device(s);
  LossScalerConfig half;
  half.mode = LossScaleMode::kStatic;
  half.initial_scale = 2;
  LossScaler halver(half);
  const GradCheck sliced_want = halver.unscale_and_check(other, s.data(), begin, end);
  const GradCheck sliced = cuda::unscale_and_check(other, sd.data(), 2.0, begin, end);
  EXPECT_EQ(sliced.nonfinite_values, 1u);
  EXPECT_EQ(sliced.nonfinite_values, sliced_want.nonfinite_values);
  EXPECT_EQ(sliced.nonfinite_blocks, sliced_want.nonfinite_blocks);
  testing::expect_close("unscaled slice (outside untouched)", testing::to_host(sd), s, 0.0);
}

// The sum of squares the noise scale starts from (logging.noise_scale): the device's, one block
// per chunk and the chunks added in order, against the CPU's; the table's alignment gaps (here
// holding values no gradient has) are not summed, and a second table gets its own chunks.
TEST(GpuMixed, GradientSumOfSquaresMatchesCpu) {
  LB_REQUIRE_GPU();
  BertConfig cfg;
  ASSERT_TRUE(bert_preset("bert-tiny", &cfg).is_ok());
  const ParamTable table = make_bert_param_table(cfg);
  std::vector<float> g = testing::random_vector(table.total_elements(), 41, 0.01f);
  auto gd = testing::to_device(g);
  const double want = gradient_sum_squares(table, g.data());
  const double got = cuda::gradient_sum_squares(table, gd.data());
  std::printf("  sum of squares cpu %.17g device %.17g\n", want, got);
  EXPECT_NEAR(got, want, 1e-12 * want);
  ParamTable other;
  other.add("a", {100}, ParamRole::kWeight);
  other.add("b", {40000}, ParamRole::kWeight);  // three chunks
  std::vector<float> h(other.total_elements(), 2.f);
  auto hd = testing::to_device(h);
  EXPECT_EQ(cuda::gradient_sum_squares(other, hd.data()), 4.0 * 40100);
}

TEST(GpuMixed, OptimizerWritesHalfWeightCopy) {
  LB_REQUIRE_GPU();
  BertConfig cfg;
  ASSERT_TRUE(bert_preset("bert-tiny", &cfg).is_ok());
  const ParamTable table = make_bert_param_table(cfg);
  const size_t n = table.total_elements();
  auto pd = testing::to_device(testing::random_vector(n, 36, 0.05f));
  auto gd = testing::to_device(testing::random_vector(n, 37, 0.01f));
  auto md = testing::to_device(std::vector<float>(n, 0.f));
  auto vd = testing::to_device(std::vector<float>(n, 0.f));
  Buffer<uint16_t> half(n, cuda::device_allocator());
  for (kern::HalfFormat f : {kern::HalfFormat::kBf16, kern::HalfFormat::kFp16}) {
    for (const char* name : {"lans", "lamb", "adamw"}) {
      std::unique_ptr<Optimizer> opt;
      ASSERT_TRUE(cuda::make_device_optimizer(name, OptimizerConfig{}, &opt).is_ok());
      FlatBuffers buf{pd.data(), gd.data(), md.data(), vd.data()};
      buf.half_params = half.data();
      buf.half_format = f;
      half.zero();
      opt->update(table, buf, 1, 1e-3, nullptr);
      const std::vector<float> p = testing::to_host(pd);
      const std::vector<uint16_t> got = testing::to_host(half);
      size_t bad = 0;
      for (const ParamEntry& e : table.entries())
        for (size_t i = e.offset; i < e.offset + e.numel; ++i) bad += got[i] != kern::float_to_half(p[i], f);
      EXPECT_EQ(bad, 0u) << name << (f == kern::HalfFormat::kBf16 ? " bf16" : " fp16");
    }
  }
}

}  // namespace
}  // namespace lansbert
