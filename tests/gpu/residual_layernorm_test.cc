// CudaOps::residual_layernorm_forward, the residual pass and the LayerNorm in one kernel (a
// warp per row): against the two kernels it replaces on the same device (the same sums and
// statistics; the kept output's copy read by a GEMM) and against the CPU twin (1e-5 relative;
// the same dropout mask), with and without dropout, at BERT's width and at one whose rows do
// not start on a Philox block.
#include <gtest/gtest.h>

#include <string>

#include "gpu_test_util.h"
#include "lansbert/backend/cpu_ops.h"
#include "residual_layernorm_args.h"

namespace lansbert {
namespace {

const RngKey kKey{31, 4, 7};

struct Outputs {
  std::vector<float> y, out, mean, rstd, read;  // read: out through a GEMM (its copy where kept)
};

template <typename Fn>
Outputs run(Ops<float>& ops, bool on_device, const std::vector<float>& y0, const std::vector<float>& res,
        const std::vector<float>& w, int rows, int cols, Fn&& step) {
  const size_t n = size_t(rows) * cols;
  constexpr int kOut = 8;
  Outputs r;
  if (on_device) {
    auto y = to_device(y0), resd = to_device(res), wd = to_device(w);
    auto out = to_device(std::vector<float>(n, 0.f)), read = to_device(std::vector<float>(size_t(rows) * kOut, 0.f));
    auto mean = to_device(std::vector<float>(rows, 0.f)), rstd = to_device(std::vector<float>(rows, 0.f));
    step(y.data(), resd.data(), out.data(), mean.data(), rstd.data());
    ops.gemm(Trans::kNo, Trans::kNo, rows, kOut, cols, 1.f, out.data(), cols, wd.data(), kOut, 0.f, read.data(), kOut);
    ops.drop_gemm_operand(out.data());
    return {to_host(y), to_host(out), to_host(mean), to_host(rstd), to_host(read)};
  }
  r.y = y0;
  r.out.assign(n, 0.f);
  r.mean.assign(rows, 0.f);
  r.rstd.assign(rows, 0.f);
  r.read.assign(size_t(rows) * kOut, 0.f);
  step(r.y.data(), res.data(), r.out.data(), r.mean.data(), r.rstd.data());
  ops.gemm(Trans::kNo, Trans::kNo, rows, kOut, cols, 1.f, r.out.data(), cols, w.data(), kOut, 0.f, r.read.data(), kOut);
  ops.drop_gemm_operand(r.out.data());
  return r;
}

TEST(GpuResidualLayerNorm, IsTheTwoKernelsAndTracksTheCpuTwin) {
  LB_REQUIRE_GPU();
  const int rows = 37;
  for (int cols : {1024, 70})
    for (GemmMath math : {GemmMath::kFp32, GemmMath::kBf16})
      for (float p : {0.0f, 0.1f})
        for (bool keep : {false, true}) {
          const std::string what = "cols " + std::to_string(cols) + " " + gemm_math_name(math) +
                                   " p=" + std::to_string(p) + (keep ? " kept" : "");
          SCOPED_TRACE(what);
          const size_t n = size_t(rows) * cols;
          const auto y0 = random_vector(n, 1), res = random_vector(n, 2), w = random_vector(size_t(cols) * 8, 3);
          const auto bias = random_vector(cols, 4), gamma = random_vector(cols, 5), beta = random_vector(cols, 6);
          cuda::OpsOptions oo;
          oo.math = math;
          auto fused = cuda::make_ops(oo), plain = cuda::make_ops(oo);
          auto cpu = cpu::make_ops<float>(math);
          auto bd = to_device(bias), gd = to_device(gamma), betad = to_device(beta);
          auto fused_step = [&](Ops<float>& ops, const float* b, const float* g, const float* be) {
            return [&ops, b, g, be, p, keep, rows, cols](float* y, const float* r, float* out, float* mean, float* rstd) {
              ops.residual_layernorm_forward(
                  testing::residual_layernorm_args(y, b, r, rows, cols, p, kKey, g, be, out, mean, rstd, keep, 1e-12f));
            };
          };
          const Outputs f = run(*fused, true, y0, res, w, rows, cols, fused_step(*fused, bd.data(), gd.data(), betad.data()));
          const Outputs u = run(*plain, true, y0, res, w, rows, cols,
                            [&](float* y, const float* r, float* out, float* mean, float* rstd) {
                              plain->bias_dropout_residual_forward(y, bd.data(), r, rows, cols, p, kKey);
                              if (keep)
                                plain->layernorm_forward_kept(y, gd.data(), betad.data(), out, mean, rstd, rows, cols,
                                                              1e-12f);
                              else
                                plain->layernorm_forward(y, gd.data(), betad.data(), out, mean, rstd, rows, cols,
                                                         1e-12f);
                            });
          // The same expressions in the same order: only a contraction nvcc makes differently
          // could move a last bit.
          expect_close("sum vs the two kernels", f.y, u.y, 1e-7);
          expect_close("mean vs the two kernels", f.mean, u.mean, 1e-7);
          expect_close("rstd vs the two kernels", f.rstd, u.rstd, 1e-7);
          expect_close("out vs the two kernels", f.out, u.out, 1e-6);
          expect_close("GEMM of out vs the two kernels", f.read, u.read, 1e-6);
          const Outputs c = run(*cpu, false, y0, res, w, rows, cols, fused_step(*cpu, bias.data(), gamma.data(), beta.data()));
          expect_close("sum vs the CPU twin", f.y, c.y, 1e-6);
          expect_close("out vs the CPU twin", f.out, c.out, 1e-5);
          expect_close("GEMM of out vs the CPU twin", f.read, c.read, math == GemmMath::kFp32 ? 1e-5 : 1e-2);
          // The dropout mask: a dropped element's sum is its residual exactly.
          size_t dropped = 0;
          for (size_t i = 0; i < n; ++i) {
            ASSERT_EQ(f.y[i] == res[i], c.y[i] == res[i]) << "mask differs at " << i;
            dropped += f.y[i] == res[i];
          }
          if (p > 0) {
            EXPECT_GT(dropped, n / 20);
          }
          EXPECT_EQ(fused->gemm_operand_conversions(), plain->gemm_operand_conversions());
        }
}

// 16-bit activations (ResidualLayerNorm::residual_half, out_copy_only): the residual used at
// its bf16 rounding, from its kept copy or rounded in the pass (the same sums, bit for bit),
// and out written only as its copy (its fp32 memory untouched); against the CPU twin doing
// the same.
TEST(GpuResidualLayerNorm, SixteenBitResidualAndCopyOnlyOutput) {
  LB_REQUIRE_GPU();
  const int rows = 37;
  for (int cols : {1024, 70}) {
    SCOPED_TRACE("cols " + std::to_string(cols));
    const size_t n = size_t(rows) * cols;
    const auto y0 = random_vector(n, 11), res = random_vector(n, 12), w = random_vector(size_t(cols) * 8, 13);
    const auto bias = random_vector(cols, 14), gamma = random_vector(cols, 15), beta = random_vector(cols, 16);
    cuda::OpsOptions oo;
    oo.math = GemmMath::kBf16;
    auto from_copy = cuda::make_ops(oo), rounded = cuda::make_ops(oo);
    auto cpu = cpu::make_ops<float>(GemmMath::kBf16);
    ASSERT_TRUE(from_copy->kept_outputs_unwritten());
    auto bd = to_device(bias), gd = to_device(gamma), betad = to_device(beta);
    auto step = [&](Ops<float>& ops, bool keep_residual, const float* b, const float* g, const float* be) {
      return [&ops, keep_residual, b, g, be, rows, cols, n](float* y, const float* r, float* out, float* mean,
                                                             float* rstd) {
        if (keep_residual) ops.keep_gemm_operand(r, n);
        auto a = testing::residual_layernorm_args(y, b, r, rows, cols, 0.1f, kKey, g, be, out, mean, rstd, true, 1e-12f);
        a.residual_half = a.out_copy_only = true;
        ops.residual_layernorm_forward(a);
        if (keep_residual) ops.drop_gemm_operand(r);
      };
    };
    const Outputs k = run(*from_copy, true, y0, res, w, rows, cols, step(*from_copy, true, bd.data(), gd.data(), betad.data()));
    const Outputs p = run(*rounded, true, y0, res, w, rows, cols, step(*rounded, false, bd.data(), gd.data(), betad.data()));
    const Outputs c = run(*cpu, false, y0, res, w, rows, cols, step(*cpu, true, bias.data(), gamma.data(), beta.data()));
    expect_close("sum, copy vs rounded in the pass", k.y, p.y, 0.0);
    expect_close("GEMM of out, copy vs rounded in the pass", k.read, p.read, 0.0);
    expect_close("sum vs the CPU twin", k.y, c.y, 1e-6);
    expect_close("GEMM of out vs the CPU twin", k.read, c.read, 1e-2);
    // The residual was used rounded: the sums with the fp32 residual differ, by bf16 rounding.
    auto fp32_residual = cuda::make_ops(oo);
    const Outputs f = run(*fp32_residual, true, y0, res, w, rows, cols,
                          [&](float* y, const float* r, float* out, float* mean, float* rstd) {
                            fp32_residual->residual_layernorm_forward(testing::residual_layernorm_args(
                                y, bd.data(), r, rows, cols, 0.1f, kKey, gd.data(), betad.data(), out, mean, rstd,
                                true, 1e-12f));
                          });
    const auto moved = testing::compare(k.y, f.y);
    EXPECT_GT(moved.max_abs, 0.0);
    EXPECT_LT(moved.rel(), 1e-2);
    for (float x : k.out) ASSERT_EQ(x, 0.f) << "out's fp32 memory was written";
  }
}

}  // namespace
}  // namespace lansbert
