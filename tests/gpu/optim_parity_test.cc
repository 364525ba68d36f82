// The device optimizers (cuda::make_device_optimizer) against the CPU rules on the bert-tiny
// parameter table: three updates from the same parameters, gradients and moments; params, m
// and v within 1e-5 relative per tensor and the reported gradient norm and clip divisor
// within 1e-9 relative. Skipped without a device.
#include <gtest/gtest.h>

#include <cmath>

#include "gpu_test_util.h"
#include "lansbert/model/bert_config.h"
#include "lansbert/model/bert_model.h"
#include "lansbert/optim/optimizer.h"

namespace lansbert {
namespace {

void run_rule(const std::string& name, double max_grad_norm) {
  BertConfig cfg;
  ASSERT_TRUE(bert_preset("bert-tiny", &cfg).is_ok());
  const ParamTable table = make_bert_param_table(cfg);
  const size_t n = table.total_elements();
  std::vector<float> p(n, 0.f), g(n, 0.f), m(n, 0.f), v(n, 0.f);
  const auto rp = testing::random_vector(n, 1, 0.05f), rg = testing::random_vector(n, 2, 0.01f);
  for (const ParamEntry& e : table.entries())
    for (size_t i = e.offset; i < e.offset + e.numel; ++i) {
      p[i] = rp[i];
      g[i] = rg[i];
    }
  // One all-zero bias block, as a zero-initialised bias's first step.
  const ParamEntry* zb = table.find("bert.pooler.dense.bias");
  ASSERT_NE(zb, nullptr);
  std::fill(p.begin() + zb->offset, p.begin() + zb->offset + zb->numel, 0.f);

  OptimizerConfig oc;
  oc.max_grad_norm = max_grad_norm;
  std::unique_ptr<Optimizer> cpu_opt, gpu_opt;
  ASSERT_TRUE(make_optimizer(name, oc, &cpu_opt).is_ok());
  ASSERT_TRUE(cuda::make_device_optimizer(name, oc, &gpu_opt).is_ok());
  auto pd = testing::to_device(p), gd = testing::to_device(g), md = testing::to_device(m),
       vd = testing::to_device(v);
  FlatBuffers hb{p.data(), g.data(), m.data(), v.data()};
  FlatBuffers db{pd.data(), gd.data(), md.data(), vd.data()};
  for (int64_t t = 1; t <= 3; ++t) {
    UpdateStats sc, sg;
    cpu_opt->update(table, hb, t, 1e-3 * t, &sc);
    gpu_opt->update(table, db, t, 1e-3 * t, &sg);
    EXPECT_NEAR(sg.grad_norm, sc.grad_norm, 1e-9 * sc.grad_norm) << name << " t=" << t;
    EXPECT_NEAR(sg.clip_divisor, sc.clip_divisor, 1e-9 * sc.clip_divisor) << name << " t=" << t;
  }
  const auto p_got = testing::to_host(pd), m_got = testing::to_host(md),
             v_got = testing::to_host(vd);
  double worst = 0;
  for (const ParamEntry& e : table.entries()) {
    auto slice = [&](const std::vector<float>& x) {
      return std::vector<float>(x.begin() + e.offset, x.begin() + e.offset + e.numel);
    };
    for (auto [got, want, what] : {std::tuple{&p_got, &p, "params"}, std::tuple{&m_got, &m, "m"},
                                   std::tuple{&v_got, &v, "v"}}) {
      const testing::ErrorStats s = testing::compare(slice(*got), slice(*want));
      worst = std::max(worst, s.rel());
      EXPECT_LE(s.rel(), 1e-5) << name << " " << what << " " << e.name << ": " << s.max_abs;
    }
  }
  std::printf("  %s (max_grad_norm %g): worst per-tensor rel error %.3e\n", name.c_str(),
              max_grad_norm, worst);
}

TEST(GpuOptim, LansMatchesCpu) {
  LB_REQUIRE_GPU();
  run_rule("lans", 1.0);
}
TEST(GpuOptim, LambMatchesCpuWithAndWithoutClipping) {
  LB_REQUIRE_GPU();
  run_rule("lamb", 1e-3);  // clips
  run_rule("lamb", 0.0);   // no clipping
}
TEST(GpuOptim, AdamWMatchesCpu) {
  LB_REQUIRE_GPU();
  run_rule("adamw", 1e-3);
}

}  // namespace
}  // namespace lansbert
