// The LayerNorm input sums in 16 bits (ResidualLayerNorm::sum_half, sum_copy_only), forward and
// backward, as the model runs them with 16-bit activations: the dense output produced as its
// kept bf16 copy only (gemm_kept), summed in place by residual_layernorm_forward, read back by
// residual_layernorm_backward. Against the CPU twin doing the same, and against the device
// without cast reuse (the sums rounded in fp32 memory: the same values), at BERT's width (the
// fused backward reads the 16-bit sums) and at 70 columns (the two-op backward on the sums
// widened into scratch). Then the same with the gradient stream in 16 bits (grad_half,
// grad_copy_only, gemm_accumulate_kept and the stream's ends) every way the device runs it.
#include <gtest/gtest.h>

#include <string>
#include <utility>

#include "gpu_test_util.h"
#include "lansbert/backend/cpu_ops.h"
#include "residual_layernorm_args.h"

namespace lansbert {
namespace {

const RngKey kKey{41, 2, 9};

struct Inputs {
  int rows = 0, cols = 0, k = 0;
  std::vector<float> x, w, bias, res, gamma, beta, dout, eye;
};

struct Outputs {
  std::vector<float> y, sums, out, mean, rstd, dsum, dy, dgamma, dbeta, dbias;
};

Inputs make_inputs(int rows, int cols, int k) {
  Inputs in;
  in.rows = rows;
  in.cols = cols;
  in.k = k;
  const size_t n = size_t(rows) * cols;
  in.x = random_vector(size_t(rows) * k, 1);
  in.w = random_vector(size_t(k) * cols, 2);
  in.bias = random_vector(cols, 3);
  in.res = random_vector(n, 4);
  in.gamma = random_vector(cols, 5);
  in.beta = random_vector(cols, 6);
  in.dout = random_vector(n, 7);
  in.eye.assign(size_t(cols) * cols, 0.0f);
  for (int c = 0; c < cols; ++c) in.eye[size_t(c) * cols + c] = 1.0f;
  return in;
}

// The forward and backward on `ops` (device pointers from `put`, results through `get`); the
// sums and dy as GEMMs read them (through an identity: exact).
// With grads, the gradient stream in 16 bits too (ResidualLayerNormGrad::grad_half; with copy_only
// grad_copy_only: d(out) cast into its kept copy first, as the model casts the heads' output
// gradient), then the layer input's gradient x w added into d(sum) (gemm_accumulate_kept, or
// gemm beta 1 and round_to_gemm_half) and the end read in fp32 (widen_kept): dsum is that end.
template <typename Put, typename Get>
Outputs run(Ops<float>& ops, const Inputs& in, bool copy_only, bool grads, Put&& put, Get&& get) {
  const int rows = in.rows, cols = in.cols, k = in.k;
  const size_t n = size_t(rows) * cols;
  auto x = put(in.x), w = put(in.w), bias = put(in.bias), res = put(in.res), gamma = put(in.gamma),
       beta = put(in.beta), dout = put(in.dout), eye = put(in.eye);
  auto y = put(std::vector<float>(n, -7.0f)), sums = put(std::vector<float>(n, 0.0f)),
       out = put(std::vector<float>(n, 0.0f)), mean = put(std::vector<float>(rows, 0.0f)),
       rstd = put(std::vector<float>(rows, 0.0f)), dsum = put(std::vector<float>(n, 0.0f)),
       dy = put(std::vector<float>(n, 0.0f)), dy_read = put(std::vector<float>(n, 0.0f)),
       dgamma = put(std::vector<float>(cols, 0.0f)), dbeta = put(std::vector<float>(cols, 0.0f)),
       dbias = put(std::vector<float>(cols, 0.0f));
  if (copy_only)
    ops.gemm_kept(Trans::kNo, Trans::kNo, rows, cols, k, x.data(), k, w.data(), cols, y.data(), cols);
  else
    ops.gemm(Trans::kNo, Trans::kNo, rows, cols, k, 1.0f, x.data(), k, w.data(), cols, 0.0f, y.data(), cols);
  auto a = testing::residual_layernorm_args(y.data(), bias.data(), res.data(), rows, cols, 0.1f, kKey, gamma.data(),
                                            beta.data(), out.data(), mean.data(), rstd.data(), false, 1e-12f);
  a.sum_half = true;
  a.sum_copy_only = copy_only;
  ops.residual_layernorm_forward(a);
  ops.gemm(Trans::kNo, Trans::kNo, rows, cols, cols, 1.0f, y.data(), cols, eye.data(), cols, 0.0f, sums.data(), cols);
  auto g = testing::residual_layernorm_grad_args(dout.data(), y.data(), gamma.data(), mean.data(), rstd.data(),
                                                 dsum.data(), dy.data(), dgamma.data(), dbeta.data(), dbias.data(),
                                                 rows, cols, 0.1f, kKey);
  g.sum_copy_only = copy_only;
  g.grad_half = grads;
  g.grad_copy_only = grads && copy_only;
  if (g.grad_copy_only) ops.keep_gemm_operand(dout.data(), n);
  ops.residual_layernorm_backward(g);
  ops.gemm(Trans::kNo, Trans::kNo, rows, cols, cols, 1.0f, dy.data(), cols, eye.data(), cols, 0.0f, dy_read.data(),
           cols);
  ops.drop_gemm_operand(dy.data());
  ops.drop_gemm_operand(y.data());
  if (g.grad_copy_only) {
    ops.gemm_accumulate_kept(Trans::kNo, Trans::kNo, rows, cols, k, x.data(), k, w.data(), cols, dsum.data(), cols);
    ops.widen_kept(dsum.data(), n);
    ops.drop_gemm_operand(dsum.data());
    ops.drop_gemm_operand(dout.data());
  } else if (grads) {
    ops.gemm(Trans::kNo, Trans::kNo, rows, cols, k, 1.0f, x.data(), k, w.data(), cols, 1.0f, dsum.data(), cols);
    ops.round_to_gemm_half(dsum.data(), n);
  }
  return {get(y), get(sums), get(out), get(mean), get(rstd), get(dsum), get(dy_read), get(dgamma), get(dbeta),
          get(dbias)};
}

Outputs on_device(Ops<float>& ops, const Inputs& in, bool copy_only, bool grads = false) {
  return run(ops, in, copy_only, grads, [](const std::vector<float>& v) { return to_device(v); },
             [](const Buffer<float>& b) { return to_host(b); });
}

Outputs on_host(Ops<float>& ops, const Inputs& in, bool grads = false) {
  return run(ops, in, true, grads, [](const std::vector<float>& v) { return v; },
             [](const std::vector<float>& v) { return v; });
}

TEST(GpuResidualSums16, ForwardAndBackwardMatchTheCpuTwinAndTheFp32HeldSums) {
  LB_REQUIRE_GPU();
  for (int cols : {1024, 70}) {
    SCOPED_TRACE("cols " + std::to_string(cols));
    const Inputs in = make_inputs(29, cols, 48);
    cuda::OpsOptions oo;
    oo.math = GemmMath::kBf16;
    auto copies = cuda::make_ops(oo);
    ASSERT_TRUE(copies->kept_outputs_unwritten());
    oo.reuse_casts = false;
    auto no_reuse = cuda::make_ops(oo);
    auto cpu = cpu::make_ops<float>(GemmMath::kBf16);
    const Outputs d = on_device(*copies, in, true), f = on_device(*no_reuse, in, false), c = on_host(*cpu, in);
    for (float v : d.y) ASSERT_EQ(v, -7.0f) << "y's fp32 memory was written";
    // The same sums and statistics from the same kernel body; the GEMM's rounding to bf16 may
    // fall the other way where cuBLAS sums in another order: one bf16 step (2^-8) at most.
    expect_close("sums vs the CPU twin", d.sums, c.sums, 0x1p-8);
    expect_close("sums vs fp32-held sums", d.sums, f.sums, 0x1p-8);
    expect_close("out vs the CPU twin", d.out, c.out, 1e-2);
    expect_close("out vs fp32-held sums", d.out, f.out, 1e-2);
    expect_close("d(sum) vs the CPU twin", d.dsum, c.dsum, 1e-2);
    expect_close("d(sum) vs fp32-held sums", d.dsum, f.dsum, 1e-2);
    expect_close("dy (as read) vs the CPU twin", d.dy, c.dy, 1e-2);
    expect_close("dgamma vs the CPU twin", d.dgamma, c.dgamma, 1e-2);
    expect_close("dbeta vs the CPU twin", d.dbeta, c.dbeta, 1e-4);
    expect_close("dbias vs the CPU twin", d.dbias, c.dbias, 1e-2);
    // Every stored sum is a bf16 value.
    for (float v : d.sums)
      ASSERT_EQ(kern::round_to_half(v, kern::HalfFormat::kBf16), v) << "a sum is not a bf16 value";
  }
}

// The gradient stream in 16 bits as well: held as copies (the fused backward reading d(out)'s
// copy and writing d(sum)'s, at 1024 columns; the two-op path on them widened, at 70), in fp32
// with rounding through the fused kernel (cast reuse on, no copies asked for), and without cast
// reuse (the two-op path, rounding in fp32). Each against the CPU twin with copies.
// fp16 (the V100's format; the kernel's fp16 instances) with copies at 1024 columns too.
TEST(GpuGradientStream16, BlockEndAndAccumulationMatchTheCpuTwinEveryWay) {
  LB_REQUIRE_GPU();
  for (GemmMath math : {GemmMath::kBf16, GemmMath::kFp16})
  for (int cols : {1024, 70}) {
    if (math == GemmMath::kFp16 && cols != 1024) continue;
    SCOPED_TRACE(std::string(gemm_math_name(math)) + ", cols " + std::to_string(cols));
    const kern::HalfFormat format = gemm_half_format(math);
    const Inputs in = make_inputs(21, cols, 40);
    cuda::OpsOptions oo;
    oo.math = math;
    auto copies = cuda::make_ops(oo);
    oo.reuse_casts = false;
    auto no_reuse = cuda::make_ops(oo);
    auto cpu = cpu::make_ops<float>(math);
    const Outputs c = on_host(*cpu, in, true);
    const std::pair<const char*, Outputs> runs[] = {{"copies", on_device(*copies, in, true, true)},
                                                    {"fp32 with reuse", on_device(*copies, in, false, true)},
                                                    {"fp32 without reuse", on_device(*no_reuse, in, false, true)}};
    for (const auto& [name, d] : runs) {
      SCOPED_TRACE(name);
      expect_close("the stream's end vs the CPU twin", d.dsum, c.dsum, 1e-2);
      expect_close("dy (as read) vs the CPU twin", d.dy, c.dy, 1e-2);
      expect_close("dgamma vs the CPU twin", d.dgamma, c.dgamma, 1e-2);
      expect_close("dbeta vs the CPU twin", d.dbeta, c.dbeta, 1e-2);
      expect_close("dbias vs the CPU twin", d.dbias, c.dbias, 1e-2);
      for (float v : d.dsum)
        ASSERT_EQ(kern::round_to_half(v, format), v) << "the stream's end is not a 16-bit value";
    }
  }
}

}  // namespace
}  // namespace lansbert
