// Every CUDA op against its CPU twin (src/cpu) on the same inputs: fp32 within 1e-5 relative
// to the largest reference value (GEMMs: 1e-5 too, with exact fp32, not TF32), dropout
// masks and the deterministic scatters exactly. Skipped without a device.
#include <gtest/gtest.h>

#include "attention_batch.h"

#include <cstring>
#include <random>
#include <utility>

#include "gpu_test_util.h"
#include "lansbert/backend/cpu_ops.h"
#include "lansbert/kernels/scatter_order.h"

namespace lansbert {
namespace {

constexpr double kTol = 1e-5;

struct Twins {
  std::unique_ptr<Ops<float>> cpu = cpu::make_ops<float>();
  std::unique_ptr<Ops<float>> gpu = cuda::make_ops();
};

TEST(GpuOps, Gemm) {
  LB_REQUIRE_GPU();
  Twins t;
  for (Trans ta : {Trans::kNo, Trans::kYes})
    for (Trans tb : {Trans::kNo, Trans::kYes}) {
      const int m = 37, n = 53, k = 129;
      auto a = random_vector(size_t(m) * k, 1), b = random_vector(size_t(k) * n, 2);
      auto c = random_vector(size_t(m) * n, 3);
      const int lda = ta == Trans::kNo ? k : m, ldb = tb == Trans::kNo ? n : k;
      auto da = to_device(a), db = to_device(b), dc = to_device(c);
      t.cpu->gemm(ta, tb, m, n, k, 0.7f, a.data(), lda, b.data(), ldb, 0.3f, c.data(), n);
      t.gpu->gemm(ta, tb, m, n, k, 0.7f, da.data(), lda, db.data(), ldb, 0.3f, dc.data(), n);
      expect_close("gemm ta=" + std::to_string(int(ta)) + " tb=" + std::to_string(int(tb)),
                   to_host(dc), c, kTol);
    }
}

TEST(GpuOps, GemmBatchedTwoLevel) {
  LB_REQUIRE_GPU();
  Twins t;
  // Attention scores: Q, K as [B, S, H*D]; C [B, H, S, S] = Q K^T per (b, h).
  const int B = 3, S = 17, H = 4, D = 8;
  auto q = random_vector(size_t(B) * S * H * D, 4), k = random_vector(size_t(B) * S * H * D, 5);
  std::vector<float> c(size_t(B) * H * S * S, 0.f);
  const GemmBatch g = testing::attention_scores_batch(B, H, S, D);
  auto dq = to_device(q), dk = to_device(k), dc = to_device(c);
  t.cpu->gemm_batched(Trans::kNo, Trans::kYes, S, S, D, 0.5f, q.data(), H * D, k.data(), H * D, 0.f,
                      c.data(), S, g);
  t.gpu->gemm_batched(Trans::kNo, Trans::kYes, S, S, D, 0.5f, dq.data(), H * D, dk.data(), H * D,
                      0.f, dc.data(), S, g);
  expect_close("gemm_batched", to_host(dc), c, kTol);
}

TEST(GpuOps, GemmTf32IsCloseButOptIn) {
  LB_REQUIRE_GPU();
  auto cpu = cpu::make_ops<float>();
  cuda::OpsOptions o;
  o.math = GemmMath::kTf32;
  auto tf32 = cuda::make_ops(o);
  const int m = 128, n = 96, k = 256;
  auto a = random_vector(size_t(m) * k, 40), b = random_vector(size_t(k) * n, 41);
  std::vector<float> c(size_t(m) * n, 0.f);
  auto da = to_device(a), db = to_device(b), dc = to_device(c);
  cpu->gemm(Trans::kNo, Trans::kNo, m, n, k, 1.f, a.data(), k, b.data(), n, 0.f, c.data(), n);
  tf32->gemm(Trans::kNo, Trans::kNo, m, n, k, 1.f, da.data(), k, db.data(), n, 0.f, dc.data(), n);
  // TF32 keeps 10 mantissa bits of each input: about 1e-3 relative, far above fp32's 1e-6.
  expect_close("gemm tf32", to_host(dc), c, 5e-3);
}

TEST(GpuOps, GemmBatchedBroadcastAndBeta) {
  LB_REQUIRE_GPU();
  Twins t;
  // B shared by every matrix of the batch (outer and inner strides 0), C accumulated.
  const int m = 9, n = 11, k = 13;
  GemmBatch g;
  g.outer = 2;
  g.inner = 3;
  g.a_outer = 3 * m * k;
  g.a_inner = m * k;
  g.c_outer = 3 * m * n;
  g.c_inner = m * n;
  auto a = random_vector(size_t(6) * m * k, 42), b = random_vector(size_t(k) * n, 43);
  auto c = random_vector(size_t(6) * m * n, 44);
  auto da = to_device(a), db = to_device(b), dc = to_device(c);
  t.cpu->gemm_batched(Trans::kNo, Trans::kNo, m, n, k, 1.f, a.data(), k, b.data(), n, 1.f, c.data(),
                      n, g);
  t.gpu->gemm_batched(Trans::kNo, Trans::kNo, m, n, k, 1.f, da.data(), k, db.data(), n, 1.f,
                      dc.data(), n, g);
  expect_close("gemm_batched broadcast B, beta 1", to_host(dc), c, kTol);
}

TEST(GpuOps, BiasAddAndResiduals) {
  LB_REQUIRE_GPU();
  Twins t;
  const int rows = 300, cols = 70;
  const size_t n = size_t(rows) * cols;
  auto y = random_vector(n, 6), bias = random_vector(cols, 7), dbias = random_vector(cols, 8);
  auto a = random_vector(n, 9), b = random_vector(n, 10), s = random_vector(n, 11);
  auto dy = to_device(y), dbi = to_device(bias), ddb = to_device(dbias);
  auto da = to_device(a), db = to_device(b), ds = to_device(s);
  Buffer<float> out(n, cuda::device_allocator());
  std::vector<float> out_h(n);

  t.cpu->bias_add_forward(y.data(), bias.data(), rows, cols);
  t.gpu->bias_add_forward(dy.data(), dbi.data(), rows, cols);
  expect_close("bias_add_forward", to_host(dy), y, kTol);
  t.cpu->bias_add_backward(a.data(), dbias.data(), rows, cols);
  t.gpu->bias_add_backward(da.data(), ddb.data(), rows, cols);
  expect_close("bias_add_backward", to_host(ddb), dbias, kTol);
  t.cpu->add_forward(a.data(), b.data(), out_h.data(), n);
  t.gpu->add_forward(da.data(), db.data(), out.data(), n);
  expect_close("add_forward", to_host(out), out_h, 0.0);
  t.cpu->accumulate(s.data(), a.data(), n);
  t.gpu->accumulate(ds.data(), da.data(), n);
  expect_close("accumulate", to_host(ds), s, 0.0);
  t.gpu->zero(ds.data(), n);
  expect_close("zero", to_host(ds), std::vector<float>(n, 0.f), 0.0);
}

TEST(GpuOps, Activations) {
  LB_REQUIRE_GPU();
  Twins t;
  const size_t n = 10007;
  auto x = random_vector(n, 12, 3.0f), dy = random_vector(n, 13);
  auto dx_d = to_device(x), ddy = to_device(dy);
  Buffer<float> y_d(n, cuda::device_allocator()), g_d(n, cuda::device_allocator());
  std::vector<float> y(n), g(n);
  for (kern::GeluForm form : {kern::GeluForm::kErf, kern::GeluForm::kTanh}) {  // model.hidden_act
    const std::string name = form == kern::GeluForm::kTanh ? " (tanh)" : " (erf)";
    t.cpu->set_gelu_form(form);
    t.gpu->set_gelu_form(form);
    t.cpu->gelu_forward(x.data(), y.data(), n);
    t.gpu->gelu_forward(dx_d.data(), y_d.data(), n);
    expect_close("gelu_forward" + name, to_host(y_d), y, kTol);
    t.cpu->gelu_backward(dy.data(), x.data(), g.data(), n);
    t.gpu->gelu_backward(ddy.data(), dx_d.data(), g_d.data(), n);
    expect_close("gelu_backward" + name, to_host(g_d), g, kTol);
  }
  t.cpu->tanh_forward(x.data(), y.data(), n);
  t.gpu->tanh_forward(dx_d.data(), y_d.data(), n);
  expect_close("tanh_forward", to_host(y_d), y, kTol);
  t.cpu->tanh_backward(dy.data(), y.data(), g.data(), n);
  t.gpu->tanh_backward(ddy.data(), y_d.data(), g_d.data(), n);
  expect_close("tanh_backward", to_host(g_d), g, kTol);
}

TEST(GpuOps, DropoutMasksEqual) {
  LB_REQUIRE_GPU();
  Twins t;
  // Past one grid-stride sweep: grid_for caps the grid at 4224 x 256 threads and each thread
  // takes a Philox block of four elements (dropout_map.cuh), so one sweep covers 4.3M
  // elements; 2^23 + 3 takes two, and Philox blocks past 2^21 are drawn. Odd, so the last
  // block is partial.
  const size_t n = (size_t(1) << 23) + 3;
  auto x = random_vector(n, 14);
  auto xd = to_device(x);
  Buffer<float> yd(n, cuda::device_allocator()), bd(n, cuda::device_allocator());
  std::vector<float> y(n), b(n);
  const RngKey key{0x1234567890abcdefull, 7, 19};
  t.cpu->dropout_forward(x.data(), y.data(), n, 0.1f, key);
  t.gpu->dropout_forward(xd.data(), yd.data(), n, 0.1f, key);
  const auto yg = to_host(yd);
  for (size_t i = 0; i < n; ++i) ASSERT_EQ(yg[i] == 0.f, y[i] == 0.f) << "mask differs at " << i;
  expect_close("dropout_forward", yg, y, kTol);
  t.cpu->dropout_backward(x.data(), b.data(), n, 0.1f, key);
  t.gpu->dropout_backward(xd.data(), bd.data(), n, 0.1f, key);
  expect_close("dropout_backward", to_host(bd), b, kTol);
  t.gpu->dropout_forward(xd.data(), yd.data(), n, 0.0f, key);
  expect_close("dropout p=0 copies", to_host(yd), x, 0.0);
}

// The fused linear-layer epilogues against their CPU twins (which equal the unfused ops
// exactly, tests/kernels/fused_test.cc); in place where the model calls them so.
TEST(GpuOps, FusedEpilogues) {
  LB_REQUIRE_GPU();
  Twins t;
  const int rows = 300, cols = 70;
  const size_t n = size_t(rows) * cols;
  const RngKey key{0x1234567890abcdefull, 3, 5};
  auto pre = random_vector(n, 60, 3.f), bias = random_vector(cols, 61), dbias = random_vector(cols, 62);
  std::vector<float> act(n);
  auto pred = to_device(pre), biasd = to_device(bias), dbiasd = to_device(dbias);
  Buffer<float> actd(n, cuda::device_allocator());
  t.cpu->bias_gelu_forward(pre.data(), bias.data(), act.data(), rows, cols);
  t.gpu->bias_gelu_forward(pred.data(), biasd.data(), actd.data(), rows, cols);
  expect_close("bias_gelu_forward pre", to_host(pred), pre, kTol);
  expect_close("bias_gelu_forward act", to_host(actd), act, kTol);
  auto d = random_vector(n, 63);
  auto dd = to_device(d);
  t.cpu->bias_gelu_backward(d.data(), pre.data(), d.data(), dbias.data(), rows, cols);
  t.gpu->bias_gelu_backward(dd.data(), pred.data(), dd.data(), dbiasd.data(), rows, cols);
  expect_close("bias_gelu_backward dpre", to_host(dd), d, kTol);
  expect_close("bias_gelu_backward dbias", to_host(dbiasd), dbias, kTol);
  for (float p : {0.0f, 0.1f}) {
    auto y = random_vector(n, 64), res = random_vector(n, 65);
    auto yd = to_device(y), resd = to_device(res);
    t.cpu->bias_dropout_residual_forward(y.data(), bias.data(), res.data(), rows, cols, p, key);
    t.gpu->bias_dropout_residual_forward(yd.data(), biasd.data(), resd.data(), rows, cols, p, key);
    expect_close("bias_dropout_residual_forward p=" + std::to_string(p), to_host(yd), y, kTol);
    auto dy = random_vector(n, 66);
    std::vector<float> dx(n);
    auto dyd = to_device(dy);
    Buffer<float> dxd(n, cuda::device_allocator());
    t.cpu->dropout_bias_backward(dy.data(), dx.data(), dbias.data(), rows, cols, p, key);
    t.gpu->dropout_bias_backward(dyd.data(), dxd.data(), dbiasd.data(), rows, cols, p, key);
    const auto dxg = to_host(dxd);
    for (size_t i = 0; i < n; ++i) ASSERT_EQ(dxg[i] == 0.f, dx[i] == 0.f) << "mask differs at " << i;
    expect_close("dropout_bias_backward dx p=" + std::to_string(p), dxg, dx, kTol);
    expect_close("dropout_bias_backward dbias p=" + std::to_string(p), to_host(dbiasd), dbias, kTol);
  }
}

TEST(GpuOps, LayerNorm) {
  LB_REQUIRE_GPU();
  Twins t;
  // The fused backward (dgamma/dbeta partials kept per block while dx is written) at BERT's
  // widths: 77 x 768 (3 blocks, the last one short) and 33 x 1024 (a lane's 32 columns, the
  // most it keeps); 600 x 100 (a last warp's columns cut off at 4; rows not a multiple of the
  // warp); 8500 x 40 (past 264 blocks of 32 rows: 33 rows a block). 5 x 1100: too wide for
  // the registers, so dx and then the column sums in two passes (the last of 35 column tiles
  // cut at 12).
  for (auto [rows, cols] : {std::pair{77, 768}, std::pair{33, 1024}, std::pair{600, 100}, std::pair{8500, 40},
                            std::pair{5, 1100}}) {
    SCOPED_TRACE("rows " + std::to_string(rows) + " cols " + std::to_string(cols));
    const size_t n = size_t(rows) * cols;
    // Rows of mean 20 and spread 2: a one-pass variance (E[x^2] - m^2) would lose ~7 bits to
    // cancellation in fp32 and show; eps 0.1 (not BERT's 1e-12) shows where eps sits.
    auto x = random_vector(n, 15, 2.0f), dy = random_vector(n, 16);
    for (float& e : x) e += 20.0f;
    auto gamma = random_vector(cols, 17), beta = random_vector(cols, 18);
    auto dgamma = random_vector(cols, 19), dbeta = random_vector(cols, 20);
    std::vector<float> y(n), mean(rows), rstd(rows), dx(n);
    auto xd = to_device(x), dyd = to_device(dy), gd = to_device(gamma), bd = to_device(beta);
    auto dgd = to_device(dgamma), dbd = to_device(dbeta);
    Buffer<float> yd(n, cuda::device_allocator()), md(rows, cuda::device_allocator()),
        rd(rows, cuda::device_allocator()), dxd(n, cuda::device_allocator());
    t.cpu->layernorm_forward(x.data(), gamma.data(), beta.data(), y.data(), mean.data(), rstd.data(),
                             rows, cols, 0.1f);
    t.gpu->layernorm_forward(xd.data(), gd.data(), bd.data(), yd.data(), md.data(), rd.data(), rows,
                             cols, 0.1f);
    expect_close("layernorm y", to_host(yd), y, kTol);
    expect_close("layernorm mean", to_host(md), mean, kTol);
    expect_close("layernorm rstd", to_host(rd), rstd, kTol);
    // Backward from the CPU's statistics on both sides, so only the backward is compared.
    auto mean_d = to_device(mean), rstd_d = to_device(rstd);
    t.cpu->layernorm_backward(dy.data(), x.data(), gamma.data(), mean.data(), rstd.data(), dx.data(),
                              dgamma.data(), dbeta.data(), rows, cols);
    t.gpu->layernorm_backward(dyd.data(), xd.data(), gd.data(), mean_d.data(), rstd_d.data(),
                              dxd.data(), dgd.data(), dbd.data(), rows, cols);
    expect_close("layernorm dx", to_host(dxd), dx, kTol);
    expect_close("layernorm dgamma", to_host(dgd), dgamma, kTol);
    expect_close("layernorm dbeta", to_host(dbd), dbeta, kTol);
  }
}

TEST(GpuOps, MaskedSoftmaxWithFullyMaskedRow) {
  LB_REQUIRE_GPU();
  Twins t;
  const int B = 3, H = 2, S = 45;
  const size_t n = size_t(B) * H * S * S;
  auto x = random_vector(n, 21, 4.0f), dp = random_vector(n, 22);
  std::vector<int32_t> mask(size_t(B) * S, 1);
  for (int s = 30; s < S; ++s) mask[S + s] = 0;     // sequence 1 padded
  for (int s = 0; s < S; ++s) mask[2 * S + s] = 0;  // sequence 2 fully masked: zeros
  for (int s = 0; s < S; ++s) mask[s] = s < 20 ? 1 : s < 33 ? 2 : s < 40 ? 3 : 0;  // row 0 packed
  std::vector<float> p(n), dx(n);
  auto xd = to_device(x), dpd = to_device(dp);
  auto maskd = to_device(mask);
  Buffer<float> pd(n, cuda::device_allocator()), dxd(n, cuda::device_allocator());
  t.cpu->softmax_forward(x.data(), mask.data(), p.data(), B, H, S, 0.125f);
  t.gpu->softmax_forward(xd.data(), maskd.data(), pd.data(), B, H, S, 0.125f);
  const auto pg = to_host(pd);
  expect_close("softmax_forward", pg, p, kTol);
  for (size_t i = size_t(2) * H * S * S; i < n; ++i) ASSERT_EQ(pg[i], 0.f) << "masked row at " << i;
  t.cpu->softmax_backward(dp.data(), p.data(), dx.data(), B, H, S, 0.125f);
  auto p_cpu_d = to_device(p);
  t.gpu->softmax_backward(dpd.data(), p_cpu_d.data(), dxd.data(), B, H, S, 0.125f);
  expect_close("softmax_backward", to_host(dxd), dx, kTol);
}

// Softmax with the attention dropout fused in: the same masks as the CPU (which runs the
// composition), the same values within kTol, a fully masked row still all zeros.
TEST(GpuOps, SoftmaxDropoutFused) {
  LB_REQUIRE_GPU();
  Twins t;
  // S = 45: lanes' runs of four keys straddle Philox blocks (rows start at 45 r); S = 200: a
  // lane takes two runs, 128 keys apart.
  for (const int S : {45, 200}) {
  SCOPED_TRACE("S = " + std::to_string(S));
  const int B = 3, H = 2;
  const size_t n = size_t(B) * H * S * S;
  const RngKey key{0x5eedull, 11, 4};
  auto x = random_vector(n, 26, 4.0f), g = random_vector(n, 27);
  std::vector<int32_t> mask(size_t(B) * S, 1);
  for (int s = 30; s < S; ++s) mask[S + s] = 0;
  for (int s = 0; s < S; ++s) mask[2 * S + s] = 0;
  for (int s = 0; s < S; ++s) mask[s] = 1 + s / 16;  // row 0 packed: sequences of 16
  std::vector<float> p(n), pdrop(n), dx(n);
  auto xd = to_device(x), gd = to_device(g);
  auto maskd = to_device(mask);
  Buffer<float> p_d(n, cuda::device_allocator()), pdrop_d(n, cuda::device_allocator()), dx_d(n, cuda::device_allocator());
  t.cpu->softmax_dropout_forward(x.data(), mask.data(), p.data(), pdrop.data(), B, H, S, 0.125f, 0.1f, key);
  t.gpu->softmax_dropout_forward(xd.data(), maskd.data(), p_d.data(), pdrop_d.data(), B, H, S, 0.125f, 0.1f, key);
  expect_close("softmax_dropout_forward probs", to_host(p_d), p, kTol);
  const auto pdg = to_host(pdrop_d);
  for (size_t i = 0; i < n; ++i) {
    if (p[i] != 0.f) {
      ASSERT_EQ(pdg[i] == 0.f, pdrop[i] == 0.f) << "mask differs at " << i;
    }
  }
  expect_close("softmax_dropout_forward dropped", pdg, pdrop, kTol);
  auto p_cpu_d = to_device(p);
  t.cpu->dropout_softmax_backward(g.data(), p.data(), dx.data(), B, H, S, 0.125f, 0.1f, key);
  t.gpu->dropout_softmax_backward(gd.data(), p_cpu_d.data(), dx_d.data(), B, H, S, 0.125f, 0.1f, key);
  expect_close("dropout_softmax_backward", to_host(dx_d), dx, kTol);
  // In place (dscores = dprobs_drop): the kernel parks the dropped gradient in dx between its
  // two loops, which is safe only because each element is read and then written by one lane.
  auto g_inplace = to_device(random_vector(n, 27));
  t.gpu->dropout_softmax_backward(g_inplace.data(), p_cpu_d.data(), g_inplace.data(), B, H, S, 0.125f, 0.1f, key);
  expect_close("dropout_softmax_backward in place", to_host(g_inplace), dx, kTol);
  }
}

TEST(GpuOps, EmbeddingAndGatherScattersAreExact) {
  LB_REQUIRE_GPU();
  Twins t;
  const int rows = 50, dim = 96, n = 300;
  std::vector<int32_t> ids(n);
  for (int i = 0; i < n; ++i)
    ids[i] = (i * 7 + i / 3) % rows % 13;  // many repeats, some rows unused
  auto table = random_vector(size_t(rows) * dim, 23), dout = random_vector(size_t(n) * dim, 24);
  auto dtable = random_vector(size_t(rows) * dim, 25);
  std::vector<float> out(size_t(n) * dim, 1.f);
  auto idd = to_device(ids);
  auto td = to_device(table), dod = to_device(dout), dtd = to_device(dtable), od = to_device(out);
  t.cpu->embedding_forward(ids.data(), table.data(), out.data(), n, dim, true);
  t.gpu->embedding_forward(idd.data(), td.data(), od.data(), n, dim, true);
  expect_close("embedding_forward accumulate", to_host(od), out, 0.0);
  t.cpu->gather_rows_forward(table.data(), ids.data(), out.data(), n, dim);
  t.gpu->gather_rows_forward(td.data(), idd.data(), od.data(), n, dim);
  expect_close("gather_rows_forward", to_host(od), out, 0.0);
  // Same order of additions as the CPU twin: bit-identical.
  t.cpu->embedding_backward(ids.data(), dout.data(), dtable.data(), n, dim);
  t.gpu->embedding_backward(idd.data(), dod.data(), dtd.data(), n, dim);
  expect_close("embedding_backward (exact)", to_host(dtd), dtable, 0.0);
  t.cpu->gather_rows_backward(dout.data(), ids.data(), dtable.data(), n, dim);
  t.gpu->gather_rows_backward(dod.data(), idd.data(), dtd.data(), n, dim);
  expect_close("gather_rows_backward (exact)", to_host(dtd), dtable, 0.0);
}

// The scatter at BERT's scale: n = B*S tokens (CUB's multi-tile sort, not its single-tile
// path), ids past 2^16 (nonzero in the third radix digit), long runs of one id (as token
// types are) next to unique ones, and rows wider than the scatter's 256 threads.
TEST(GpuOps, ScatterAtBertScaleIsExact) {
  LB_REQUIRE_GPU();
  Twins t;
  const int rows = 70000, dim = 260, n = 32768;
  std::mt19937 g(28);
  std::uniform_int_distribution<int32_t> any_row(0, rows - 1);
  std::vector<int32_t> ids(n);
  for (int i = 0; i < n; ++i) ids[i] = i % 3 == 0 ? any_row(g) : (i % 3 == 1 ? 1 : rows - 1);
  auto dout = random_vector(size_t(n) * dim, 29), dtable = random_vector(size_t(rows) * dim, 30);
  auto idd = to_device(ids);
  auto dod = to_device(dout), dtd = to_device(dtable);
  t.cpu->embedding_backward(ids.data(), dout.data(), dtable.data(), n, dim);
  t.gpu->embedding_backward(idd.data(), dod.data(), dtd.data(), n, dim);
  expect_close("embedding_backward at scale (exact)", to_host(dtd), dtable, 0.0);
}

// The scatter's chunks (kernels/scatter_order.h) at their edges: fewer entries than a chunk,
// exactly one, one more; runs that end on a chunk boundary, start on one, fill whole chunks,
// cross one or several, and a single run over everything.
TEST(GpuOps, ScatterRunsAtChunkEdgesAreExact) {
  LB_REQUIRE_GPU();
  Twins t;
  constexpr int P = kern::kScatterPiece, rows = 6, dim = 37;
  for (int n : {1, P - 1, P, P + 1, 2 * P, 5 * P + 3}) {
    for (int pattern = 0; pattern < 3; ++pattern) {
      std::vector<int32_t> ids(n);
      for (int i = 0; i < n; ++i)
        ids[i] = pattern == 0 ? 2 : (pattern == 1 ? (i / P) % rows : (i < P / 2 ? 5 : (i < 3 * P ? 1 : i % 3)));
      auto dout = random_vector(size_t(n) * dim, 40 + n), dtable = random_vector(size_t(rows) * dim, 41);
      auto idd = to_device(ids);
      auto dod = to_device(dout), dtd = to_device(dtable);
      t.cpu->embedding_backward(ids.data(), dout.data(), dtable.data(), n, dim);
      t.gpu->embedding_backward(idd.data(), dod.data(), dtd.data(), n, dim);
      expect_close("scatter n=" + std::to_string(n) + " pattern " + std::to_string(pattern),
                   to_host(dtd), dtable, 0.0);
    }
  }
}

TEST(GpuOps, CrossEntropyMlmAndNsp) {
  LB_REQUIRE_GPU();
  Twins t;
  for (int classes : {2, 30522}) {
    const int rows = 9;
    auto x = random_vector(size_t(rows) * classes, 26, 2.0f);
    std::vector<int32_t> labels(rows);
    for (int r = 0; r < rows; ++r) labels[r] = r == 4 ? -1 : (r * 977) % classes;
    labels[1] = 0;
    // Make row 1's argmax its label, so `correct` is exercised both ways.
    x[size_t(1) * classes] = 50.f;
    // Tied maxima: the argmax is the first index (the CPU twin's). With 30522 classes the
    // first one sits in thread 500 (the last warp) and the second in thread 1 (warp 0), so a
    // reduction that breaks ties by thread or warp order gets it wrong; row 2's label is the
    // second index (not correct), row 3's the first (correct).
    const int first = classes == 2 ? 0 : 500, second = classes == 2 ? 1 : 513;
    for (int r : {2, 3}) {
      x[size_t(r) * classes + first] = 50.f;
      x[size_t(r) * classes + second] = 50.f;
    }
    labels[2] = second;
    labels[3] = first;
    std::vector<float> loss(rows), dx(size_t(rows) * classes);
    std::vector<int32_t> correct(rows);
    auto xd = to_device(x);
    auto ld = to_device(labels);
    Buffer<float> lossd(rows, cuda::device_allocator()),
        dxd(size_t(rows) * classes, cuda::device_allocator());
    Buffer<int32_t> cd(rows, cuda::device_allocator());
    t.cpu->cross_entropy_forward(x.data(), labels.data(), loss.data(), correct.data(), rows,
                                 classes);
    t.gpu->cross_entropy_forward(xd.data(), ld.data(), lossd.data(), cd.data(), rows, classes);
    const std::string c = " classes=" + std::to_string(classes);
    expect_close("cross_entropy loss" + c, to_host(lossd), loss, kTol);
    EXPECT_EQ(to_host(cd), correct) << c;
    t.cpu->cross_entropy_backward(x.data(), labels.data(), dx.data(), rows, classes, 0.25f);
    t.gpu->cross_entropy_backward(xd.data(), ld.data(), dxd.data(), rows, classes, 0.25f);
    expect_close("cross_entropy dlogits" + c, to_host(dxd), dx, kTol);
  }
}

}  // namespace
}  // namespace lansbert
