// The device twins of tests/kernels/kept_output_test.cc: CudaOps' softmax kernels writing a
// kept GEMM operand's 16-bit copy directly (Ops::softmax_dropout_forward_kept,
// Ops::softmax_backward_kept) against the CPU's kept ops, through a GEMM that reads the
// output; nothing is cast for it, and the fp32 output stays unwritten.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <string>

#include "gpu_test_util.h"
#include "lansbert/backend/cpu_ops.h"

namespace lansbert {
namespace {

constexpr int kB = 2, kA = 4, kS = 77, kD = 16;
constexpr size_t kN = size_t(kB) * kA * kS * kS;
constexpr float kScale = 0.125f;
const RngKey kKey{21, 22};

std::vector<int32_t> key_mask() {
  std::vector<int32_t> m(kB * kS, 1);
  for (int j = 60; j < kS; ++j) m[j] = 0;  // sequence 0 is padded
  return m;
}

// y [B*A*S, D] = x [B*A*S, S] * w [S, D].
template <typename Ptr>
void read_by_gemm(Ops<float>& ops, const float* x, Ptr w, float* y) {
  ops.gemm(Trans::kNo, Trans::kNo, kB * kA * kS, kD, kS, 1.f, x, kS, w, kD, 0.f, y, kD);
}

bool all_nan(const std::vector<float>& x) {
  for (float v : x)
    if (!std::isnan(v)) return false;
  return true;
}

// On the device: the kept ops against the plain op + keep_gemm_operand (which casts the fp32
// output with the cast kernel) on another CudaOps: the GEMMs over the two copies must agree
// bit for bit, with kN fewer elements cast. Then against the CPU's kept ops within 1e-3 (the
// exp of each side may differ in the last bit, which can move a 16-bit rounding).
TEST(GpuKeptOutput, SoftmaxKernelsWriteTheBitsOfTheCast) {
  LB_REQUIRE_GPU();
  const auto mask = key_mask();
  const auto scores = random_vector(kN, 71), dprobs = random_vector(kN, 72), w = random_vector(size_t(kS) * kD, 73);
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const size_t ny = size_t(kB) * kA * kS * kD;
  for (GemmMath math : {GemmMath::kBf16, GemmMath::kFp16}) {
    for (float p : {0.1f, 0.f}) {
      const std::string what = std::string(gemm_math_name(math)) + " p=" + std::to_string(p);
      cuda::OpsOptions oo;
      oo.math = math;
      auto plain = cuda::make_ops(oo), kept = cuda::make_ops(oo);
      auto cpu = cpu::make_ops<float>(math);
      auto sd = to_device(scores), wd = to_device(w);
      auto md = to_device(mask);
      // Forward.
      auto p1 = to_device(std::vector<float>(kN, 0.f)), pd1 = to_device(std::vector<float>(kN, 0.f));
      auto p2 = to_device(std::vector<float>(kN, 0.f)), pd2 = to_device(std::vector<float>(kN, nan));
      auto y1 = to_device(std::vector<float>(ny, 0.f)), y2 = to_device(std::vector<float>(ny, 0.f));
      plain->softmax_dropout_forward(sd.data(), md.data(), p1.data(), pd1.data(), kB, kA, kS, kScale, p, kKey);
      plain->keep_gemm_operand(pd1.data(), kN);
      kept->softmax_dropout_forward_kept(sd.data(), md.data(), p2.data(), pd2.data(), kB, kA, kS, kScale, p, kKey);
      read_by_gemm(*plain, pd1.data(), wd.data(), y1.data());
      read_by_gemm(*kept, pd2.data(), wd.data(), y2.data());
      EXPECT_EQ(to_host(p1), to_host(p2)) << what;
      EXPECT_EQ(to_host(y1), to_host(y2)) << "forward " << what;
      EXPECT_EQ(plain->gemm_operand_conversions() - kept->gemm_operand_conversions(), kN) << what;
      EXPECT_TRUE(all_nan(to_host(pd2))) << what << ": the fp32 output was written";
      std::vector<float> probs(kN), pd(kN), y(ny);
      cpu->softmax_dropout_forward_kept(scores.data(), mask.data(), probs.data(), pd.data(), kB, kA, kS, kScale, p,
                                        kKey);
      read_by_gemm(*cpu, pd.data(), w.data(), y.data());
      expect_close("forward vs the CPU twin " + what, to_host(y2), y, 1e-3);
      // Backward, from the device's probabilities.
      auto dp1 = to_device(dprobs), dp2 = to_device(dprobs);
      auto ds1 = to_device(std::vector<float>(kN, 0.f)), ds2 = to_device(std::vector<float>(kN, nan));
      if (p > 0)
        plain->dropout_softmax_backward(dp1.data(), p1.data(), ds1.data(), kB, kA, kS, kScale, p, kKey);
      else
        plain->softmax_backward(dp1.data(), p1.data(), ds1.data(), kB, kA, kS, kScale);
      plain->keep_gemm_operand(ds1.data(), kN);
      kept->softmax_backward_kept(dp2.data(), p2.data(), ds2.data(), kB, kA, kS, kScale, p, kKey);
      read_by_gemm(*plain, ds1.data(), wd.data(), y1.data());
      read_by_gemm(*kept, ds2.data(), wd.data(), y2.data());
      EXPECT_EQ(to_host(y1), to_host(y2)) << "backward " << what;
      EXPECT_TRUE(all_nan(to_host(ds2))) << what;
      std::vector<float> dp = dprobs, ds(kN);
      cpu->softmax_backward_kept(dp.data(), probs.data(), ds.data(), kB, kA, kS, kScale, p, kKey);
      read_by_gemm(*cpu, ds.data(), w.data(), y.data());
      expect_close("backward vs the CPU twin " + what, to_host(y2), y, 1e-3);
      for (Ops<float>* o : {plain.get(), kept.get()}) {
        o->drop_gemm_operand(o == plain.get() ? pd1.data() : pd2.data());
        o->drop_gemm_operand(o == plain.get() ? ds1.data() : ds2.data());
      }
    }
  }
}

// The FFN's GELU output written as its kept copy: bit for bit what the cast of the plain
// op's output gives, on the same device; the input stays as it was.
TEST(GpuKeptOutput, GeluKernelWritesTheBitsOfTheCast) {
  LB_REQUIRE_GPU();
  const int rows = 96, cols = 200;
  const size_t n = size_t(rows) * cols;
  const auto pre = random_vector(n, 74), w = random_vector(size_t(cols) * kD, 76);
  for (GemmMath math : {GemmMath::kBf16, GemmMath::kFp16}) {
    cuda::OpsOptions oo;
    oo.math = math;
    auto plain = cuda::make_ops(oo), kept = cuda::make_ops(oo);
    auto pre1 = to_device(pre), pre2 = to_device(pre), wd = to_device(w);
    auto act1 = to_device(std::vector<float>(n, 0.f));
    auto act2 = to_device(std::vector<float>(n, std::numeric_limits<float>::quiet_NaN()));
    auto y1 = to_device(std::vector<float>(size_t(rows) * kD, 0.f)), y2 = to_device(std::vector<float>(size_t(rows) * kD, 0.f));
    plain->gelu_forward(pre1.data(), act1.data(), n);
    plain->keep_gemm_operand(act1.data(), n);
    kept->gelu_forward_kept(pre2.data(), act2.data(), n);
    plain->gemm(Trans::kNo, Trans::kNo, rows, kD, cols, 1.f, act1.data(), cols, wd.data(), kD, 0.f, y1.data(), kD);
    kept->gemm(Trans::kNo, Trans::kNo, rows, kD, cols, 1.f, act2.data(), cols, wd.data(), kD, 0.f, y2.data(), kD);
    EXPECT_EQ(to_host(pre2), pre) << gemm_math_name(math);
    EXPECT_EQ(to_host(y1), to_host(y2)) << gemm_math_name(math);
    EXPECT_TRUE(all_nan(to_host(act2))) << gemm_math_name(math);
    EXPECT_EQ(plain->gemm_operand_conversions() - kept->gemm_operand_conversions(), n) << gemm_math_name(math);
    kept->drop_gemm_operand(act2.data());
    // The output at the input's address, as the model's layout has it: the input stays, GEMMs
    // given the address read the GELU's copy.
    auto y3 = to_device(std::vector<float>(size_t(rows) * kD, 0.f));
    kept->gelu_forward_kept(pre2.data(), pre2.data(), n);
    kept->gemm(Trans::kNo, Trans::kNo, rows, kD, cols, 1.f, pre2.data(), cols, wd.data(), kD, 0.f, y3.data(), kD);
    EXPECT_EQ(to_host(pre2), pre) << gemm_math_name(math);
    EXPECT_EQ(to_host(y1), to_host(y3)) << gemm_math_name(math);
    kept->drop_gemm_operand(pre2.data());
    plain->drop_gemm_operand(act1.data());
  }
}

// LayerNorm forward, the dropout + bias-gradient backward (with and without dropout) and the
// GELU backward and the embeddings' dropout (with and without dropout) writing their output's
// 16-bit copy in the same pass, and the bias-gradient sums writing their input's: fp32 outputs and bias gradients as the plain op's, the GEMM
// over the copy bit for bit that over the cast. The dropout-bias backward (ops 1, 2) and the GELU
// backward (op 3) write only the copy (ops.h): their fp32 outputs stay untouched.
TEST(GpuKeptOutput, WrittenOutputsComeWithTheBitsOfTheCast) {
  LB_REQUIRE_GPU();
  const int rows = 130, cols = 96;
  const size_t n = size_t(rows) * cols;
  const auto x = random_vector(n, 81), g = random_vector(cols, 82), b = random_vector(cols, 83),
             pre = random_vector(n, 84), w = random_vector(size_t(cols) * kD, 85);
  for (GemmMath math : {GemmMath::kBf16, GemmMath::kFp16}) {
    for (int op = 0; op < 7; ++op) {
      const std::string what = std::string(gemm_math_name(math)) + " op " + std::to_string(op);
      cuda::OpsOptions oo;
      oo.math = math;
      auto plain = cuda::make_ops(oo), kept = cuda::make_ops(oo);
      auto xd = to_device(x), gd = to_device(g), bd = to_device(b), pd = to_device(pre), wd = to_device(w);
      auto y1 = to_device(std::vector<float>(n, 0.f));
      const bool copy_only = op >= 1 && op <= 3;  // outputs only GEMMs read: the copy alone (ops.h)
      auto y2 = to_device(std::vector<float>(n, copy_only ? std::numeric_limits<float>::quiet_NaN() : 0.f));
      auto s1 = to_device(std::vector<float>(rows, 0.f)), s2 = to_device(std::vector<float>(rows, 0.f));
      auto t1 = to_device(std::vector<float>(rows, 0.f)), t2 = to_device(std::vector<float>(rows, 0.f));
      auto db1 = to_device(std::vector<float>(cols, 0.5f)), db2 = to_device(std::vector<float>(cols, 0.5f));
      switch (op) {
        case 0:
          plain->layernorm_forward(xd.data(), gd.data(), bd.data(), y1.data(), s1.data(), t1.data(), rows, cols, 1e-5f);
          kept->layernorm_forward_kept(xd.data(), gd.data(), bd.data(), y2.data(), s2.data(), t2.data(), rows, cols,
                                       1e-5f);
          break;
        case 1:
        case 2: {
          const float p = op == 1 ? 0.1f : 0.f;
          plain->dropout_bias_backward(xd.data(), y1.data(), db1.data(), rows, cols, p, kKey);
          kept->dropout_bias_backward_kept(xd.data(), y2.data(), db2.data(), rows, cols, p, kKey);
          break;
        }
        case 3:
          plain->bias_gelu_backward(xd.data(), pd.data(), y1.data(), db1.data(), rows, cols);
          kept->bias_gelu_backward_kept(xd.data(), pd.data(), y2.data(), db2.data(), rows, cols);
          break;
        case 5:
        case 6: {
          const float p = op == 5 ? 0.1f : 0.f;
          plain->dropout_forward(xd.data(), y1.data(), n, p, kKey);
          kept->dropout_forward_kept(xd.data(), y2.data(), n, p, kKey);
          break;
        }
        default:  // y = x, kept by the sums that read it
          cuda::device_allocator().copy_from_host(y1.data(), x.data(), n * sizeof(float));
          cuda::device_allocator().copy_from_host(y2.data(), x.data(), n * sizeof(float));
          plain->bias_add_backward(y1.data(), db1.data(), rows, cols);
          kept->bias_add_backward_kept(y2.data(), db2.data(), rows, cols);
      }
      plain->keep_gemm_operand(y1.data(), n);
      auto z1 = to_device(std::vector<float>(size_t(rows) * kD, 0.f)), z2 = to_device(std::vector<float>(size_t(rows) * kD, 0.f));
      plain->gemm(Trans::kNo, Trans::kNo, rows, kD, cols, 1.f, y1.data(), cols, wd.data(), kD, 0.f, z1.data(), kD);
      kept->gemm(Trans::kNo, Trans::kNo, rows, kD, cols, 1.f, y2.data(), cols, wd.data(), kD, 0.f, z2.data(), kD);
      if (copy_only)
        EXPECT_TRUE(all_nan(to_host(y2))) << what << ": the fp32 output was written";
      else
        EXPECT_EQ(to_host(y1), to_host(y2)) << what;
      EXPECT_EQ(to_host(s1), to_host(s2)) << what;
      EXPECT_EQ(to_host(t1), to_host(t2)) << what;
      EXPECT_EQ(to_host(db1), to_host(db2)) << what;
      EXPECT_EQ(to_host(z1), to_host(z2)) << what;
      EXPECT_EQ(plain->gemm_operand_conversions() - kept->gemm_operand_conversions(), n) << what;
      EXPECT_EQ(kept->gemm_operand_copy_writes(), n) << what;
      plain->drop_gemm_operand(y1.data());
      kept->drop_gemm_operand(y2.data());
    }
  }
}

}  // namespace
}  // namespace lansbert
