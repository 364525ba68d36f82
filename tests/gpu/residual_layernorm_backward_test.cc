// CudaOps::residual_layernorm_backward, the LayerNorm backward and the residual block's
// dropout-bias backward in one pass: against the two kernels it replaces on the same device
// (d(sum), dgamma and dbeta from the same kernel body in the same order; d(y)'s kept copy read
// by a GEMM; dbias summed in another order) and against the CPU twin (1e-5 relative), with and
// without dropout, in fp32 (no copies kept: the two ops) and bf16, at BERT's widths, at 100
// (the narrowest instance, cut inside a run), and where the two ops remain: 70 columns (not
// whole Philox blocks) and 1028 (wider than the registers hold).
#include <gtest/gtest.h>

#include <string>

#include "gpu_test_util.h"
#include "lansbert/backend/cpu_ops.h"
#include "residual_layernorm_args.h"

namespace lansbert {
namespace {

const RngKey kKey{12, 3, 5};
constexpr int kRead = 8;  // columns of the GEMM that reads d(y)

struct Grads {
  std::vector<float> dsum, dgamma, dbeta, dbias, read;  // read: d(y) through a GEMM (its copy where kept)
};

struct Inputs {
  std::vector<float> dout, sum, gamma, mean, rstd, dgamma, dbeta, dbias, w;
};

// `step(g)` runs the backward on the arguments g (device or host pointers, as `ops`).
template <typename Fn>
Grads run(Ops<float>& ops, bool on_device, const Inputs& in, int rows, int cols, float p, Fn&& step) {
  const size_t n = size_t(rows) * cols;
  if (on_device) {
    auto dout = to_device(in.dout), sum = to_device(in.sum), gamma = to_device(in.gamma), mean = to_device(in.mean),
         rstd = to_device(in.rstd), dgamma = to_device(in.dgamma), dbeta = to_device(in.dbeta),
         dbias = to_device(in.dbias), w = to_device(in.w), dsum = to_device(std::vector<float>(n, 0.f)),
         dy = to_device(std::vector<float>(n, 0.f)), read = to_device(std::vector<float>(size_t(rows) * kRead, 0.f));
    step(testing::residual_layernorm_grad_args(dout.data(), sum.data(), gamma.data(), mean.data(), rstd.data(),
                                               dsum.data(), dy.data(), dgamma.data(), dbeta.data(), dbias.data(), rows,
                                               cols, p, kKey));
    ops.gemm(Trans::kNo, Trans::kNo, rows, kRead, cols, 1.f, dy.data(), cols, w.data(), kRead, 0.f, read.data(), kRead);
    ops.drop_gemm_operand(dy.data());
    return {to_host(dsum), to_host(dgamma), to_host(dbeta), to_host(dbias), to_host(read)};
  }
  Grads r{std::vector<float>(n, 0.f), in.dgamma, in.dbeta, in.dbias, std::vector<float>(size_t(rows) * kRead, 0.f)};
  std::vector<float> dy(n, 0.f);
  step(testing::residual_layernorm_grad_args(in.dout.data(), in.sum.data(), in.gamma.data(), in.mean.data(),
                                             in.rstd.data(), r.dsum.data(), dy.data(), r.dgamma.data(), r.dbeta.data(),
                                             r.dbias.data(), rows, cols, p, kKey));
  ops.gemm(Trans::kNo, Trans::kNo, rows, kRead, cols, 1.f, dy.data(), cols, in.w.data(), kRead, 0.f, r.read.data(),
           kRead);
  ops.drop_gemm_operand(dy.data());
  return r;
}

TEST(GpuResidualLayerNormBackward, IsTheTwoKernelsAndTracksTheCpuTwin) {
  LB_REQUIRE_GPU();
  const int rows = 45;
  for (int cols : {1024, 768, 100, 70, 1028})
    for (GemmMath math : {GemmMath::kFp32, GemmMath::kBf16})
      for (float p : {0.0f, 0.1f}) {
        SCOPED_TRACE("cols " + std::to_string(cols) + " " + gemm_math_name(math) + " p=" + std::to_string(p));
        const size_t n = size_t(rows) * cols;
        auto cpu = cpu::make_ops<float>(math);
        Inputs in{random_vector(n, 1), random_vector(n, 2, 3.0f), random_vector(cols, 3), std::vector<float>(rows),
                  std::vector<float>(rows), random_vector(cols, 4), random_vector(cols, 5), random_vector(cols, 6),
                  random_vector(size_t(cols) * kRead, 7)};
        // The statistics the forward would have kept for `sum`.
        std::vector<float> out(n);
        cpu->layernorm_forward(in.sum.data(), in.gamma.data(), std::vector<float>(cols, 0.f).data(), out.data(),
                               in.mean.data(), in.rstd.data(), rows, cols, 1e-12f);
        cuda::OpsOptions oo;
        oo.math = math;
        auto fused = cuda::make_ops(oo), plain = cuda::make_ops(oo);
        const Grads f = run(*fused, true, in, rows, cols, p,
                            [&](const ResidualLayerNormGrad<float>& g) { fused->residual_layernorm_backward(g); });
        const Grads u = run(*plain, true, in, rows, cols, p, [&](const ResidualLayerNormGrad<float>& g) {
          plain->layernorm_backward(g.dout, g.sum, g.gamma, g.mean, g.rstd, g.dsum, g.dgamma, g.dbeta, rows, cols);
          plain->dropout_bias_backward_kept(g.dsum, g.dy, g.dbias, rows, cols, p, kKey);
        });
        // The same expressions in the same order (dbias aside): only a contraction nvcc makes
        // differently could move a last bit.
        expect_close("dsum vs the two kernels", f.dsum, u.dsum, 1e-7);
        expect_close("dgamma vs the two kernels", f.dgamma, u.dgamma, 1e-7);
        expect_close("dbeta vs the two kernels", f.dbeta, u.dbeta, 1e-7);
        expect_close("GEMM of dy vs the two kernels", f.read, u.read, 1e-6);
        expect_close("dbias vs the two kernels (another order)", f.dbias, u.dbias, 1e-6);
        const Grads c = run(*cpu, false, in, rows, cols, p,
                            [&](const ResidualLayerNormGrad<float>& g) { cpu->residual_layernorm_backward(g); });
        expect_close("dsum vs the CPU twin", f.dsum, c.dsum, 1e-5);
        expect_close("dgamma vs the CPU twin", f.dgamma, c.dgamma, 1e-5);
        expect_close("dbeta vs the CPU twin", f.dbeta, c.dbeta, 1e-5);
        expect_close("dbias vs the CPU twin", f.dbias, c.dbias, 1e-5);
        expect_close("GEMM of dy vs the CPU twin", f.read, c.read, math == GemmMath::kFp32 ? 1e-5 : 1e-2);
        EXPECT_EQ(fused->gemm_operand_conversions(), plain->gemm_operand_conversions());
      }
}

}  // namespace
}  // namespace lansbert
