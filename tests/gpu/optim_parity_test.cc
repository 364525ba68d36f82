// The device optimizers (cuda::make_device_optimizer) against the CPU rules on the bert-tiny
// parameter table: three updates from the same parameters, gradients and moments; params, m
// and v within 1e-5 relative per tensor and the reported gradient norm and clip divisor
// within 1e-9 relative. The sharded (ZeRO-1) device update is checked the same way, with
// four slices (one empty) updated from four host threads standing in for four ranks.
// Skipped without a device.
#include <gtest/gtest.h>

#include <barrier>
#include <cmath>
#include <limits>
#include <thread>

#include "gpu_test_util.h"
#include "lansbert/core/check.h"
#include "lansbert/model/bert_config.h"
#include "lansbert/model/bert_model.h"
#include "lansbert/optim/optimizer.h"

namespace lansbert {
namespace {

void run_rule(const std::string& name, double max_grad_norm, bool trust_ratio_on_excluded = false) {
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
  // All-zero gradients on a decayed block (LANS's g_scale = 1 branch; only wd*p moves it)
  // and on an excluded block (update norm 0: trust ratio 1 and a zero step).
  for (const char* zero_grad : {"bert.pooler.dense.weight", "bert.embeddings.LayerNorm.bias"}) {
    const ParamEntry* e = table.find(zero_grad);
    ASSERT_NE(e, nullptr) << zero_grad;
    std::fill(g.begin() + e->offset, g.begin() + e->offset + e->numel, 0.f);
  }

  OptimizerConfig oc;
  oc.max_grad_norm = max_grad_norm;
  oc.trust_ratio_on_excluded = trust_ratio_on_excluded;
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
    // The trust ratios reported (host doubles from sums reduced in another order).
    for (const auto& [got, want] : {std::pair{&sg.trust_ratio, &sc.trust_ratio},
                                    std::pair{&sg.trust_ratio_grad, &sc.trust_ratio_grad}}) {
      ASSERT_EQ(got->size(), want->size()) << name << " t=" << t;
      for (size_t b = 0; b < want->size(); ++b) {
        if (std::isnan((*want)[b])) {
          EXPECT_TRUE(std::isnan((*got)[b])) << name << " block " << b;
        } else {
          EXPECT_NEAR((*got)[b], (*want)[b], 1e-6 * (*want)[b]) << name << " t=" << t << " block " << b;
        }
      }
    }
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
  std::printf("  %s (max_grad_norm %g%s): worst per-tensor rel error %.3e\n", name.c_str(),
              max_grad_norm, trust_ratio_on_excluded ? ", NVLAMB" : "", worst);
}

// Device optimizers own consecutive slices [cuts[k], cuts[k+1]) and exchange their per-block
// sums through a barrier, as ShardSpec::reduce_sums does over MPI. The cuts fall inside the
// word embeddings (a block of many chunks, at an offset that is not a chunk boundary of the
// block), inside a one-chunk block, and one slice is empty (a rank that owns nothing still
// joins every reduction). Every slice's params, m and v must match the CPU rule on the whole
// buffer.
void run_sharded(const std::string& name, double max_grad_norm) {
  BertConfig cfg;
  ASSERT_TRUE(bert_preset("bert-tiny", &cfg).is_ok());
  const ParamTable table = make_bert_param_table(cfg);
  const size_t n = table.total_elements();
  const ParamEntry* q = table.find("bert.encoder.layer.0.attention.self.query.weight");
  const ParamEntry* w = table.find("bert.embeddings.word_embeddings.weight");
  ASSERT_NE(q, nullptr);
  ASSERT_NE(w, nullptr);
  const size_t a = ParamTable::kAlign;
  const size_t cut_w = (w->offset + 5 * 16384 + 3 * a) / a * a;  // mid-chunk, 6th chunk
  const size_t cut_q = (q->offset + q->numel / 3) / a * a;
  ASSERT_LT(cut_w, w->offset + w->numel);
  ASSERT_LT(cut_w, cut_q);
  const std::vector<size_t> cuts = {0, cut_w, cut_q, cut_q, n};  // party 2 owns nothing
  const int parties = static_cast<int>(cuts.size()) - 1;
  std::vector<float> p(n, 0.f), g(n, 0.f), m(n, 0.f), v(n, 0.f);
  const auto rp = testing::random_vector(n, 3, 0.05f), rg = testing::random_vector(n, 4, 0.01f);
  for (const ParamEntry& e : table.entries())
    for (size_t i = e.offset; i < e.offset + e.numel; ++i) {
      p[i] = rp[i];
      g[i] = rg[i];
    }
  OptimizerConfig oc;
  oc.max_grad_norm = max_grad_norm;
  std::unique_ptr<Optimizer> cpu_opt;
  ASSERT_TRUE(make_optimizer(name, oc, &cpu_opt).is_ok());

  std::barrier<> bar(parties);
  std::vector<std::vector<double>> posted(parties);
  std::vector<std::vector<float>> got_p(parties), got_m(parties), got_v(parties);
  std::vector<double> grad_norm(parties, 0.0);
  std::vector<std::vector<double>> ratios(parties), ratios_g(parties);
  auto party = [&](int k) {
    const size_t b = cuts[k], e = cuts[k + 1];
    std::unique_ptr<Optimizer> opt;
    LB_CHECK(cuda::make_device_optimizer(name, oc, &opt).is_ok());
    ShardSpec spec;
    spec.begin = b;
    spec.end = e;
    spec.reduce_sums = [&, k](double* sums, size_t count) {
      posted[k].assign(sums, sums + count);
      bar.arrive_and_wait();
      for (size_t i = 0; i < count; ++i) {
        double t = 0;
        for (int r = 0; r < parties; ++r) t += posted[r][i];
        sums[i] = t;
      }
      bar.arrive_and_wait();  // nobody reposts before all have read
    };
    opt->set_shard(spec);
    auto pd = testing::to_device(p), gd = testing::to_device(g);
    auto md = testing::to_device(std::vector<float>(e - b, 0.f)), vd = testing::to_device(std::vector<float>(e - b, 0.f));
    FlatBuffers db{pd.data(), gd.data(), md.data(), vd.data()};
    for (int64_t t = 1; t <= 3; ++t) {
      UpdateStats st;
      opt->update(table, db, t, 1e-3 * t, &st);
      grad_norm[k] = st.grad_norm;
      ratios[k] = st.trust_ratio;
      ratios_g[k] = st.trust_ratio_grad;
    }
    got_p[k] = testing::to_host(pd);
    got_m[k] = testing::to_host(md);
    got_v[k] = testing::to_host(vd);
  };
  const std::vector<float> p0 = p;  // the CPU rule below updates p in place
  std::vector<std::thread> threads;
  for (int k = 0; k < parties; ++k) threads.emplace_back(party, k);
  for (std::thread& t : threads) t.join();
  FlatBuffers hb{p.data(), g.data(), m.data(), v.data()};
  UpdateStats sc;
  for (int64_t t = 1; t <= 3; ++t) cpu_opt->update(table, hb, t, 1e-3 * t, &sc);
  double worst = 0;
  for (int k = 0; k < parties; ++k) {
    EXPECT_NEAR(grad_norm[k], sc.grad_norm, 1e-9 * sc.grad_norm) << name << " shard " << k;
    // Whole-tensor trust ratios on every party, blocks outside its slice included.
    for (const auto& [got, want] : {std::pair{&ratios[k], &sc.trust_ratio}, std::pair{&ratios_g[k], &sc.trust_ratio_grad}}) {
      ASSERT_EQ(got->size(), want->size()) << name << " shard " << k;
      for (size_t b = 0; b < want->size(); ++b) {
        EXPECT_EQ(std::isnan((*got)[b]), std::isnan((*want)[b])) << name << " shard " << k << " " << b;
        if (!std::isnan((*want)[b])) {
          EXPECT_NEAR((*got)[b], (*want)[b], 1e-6 * (*want)[b]) << name << " shard " << k << " " << b;
        }
      }
    }
    const size_t b = cuts[k], e = cuts[k + 1];
    // Outside its slice a party's parameters are untouched (the all-gather brings them).
    size_t moved = 0;
    for (size_t i = 0; i < n; ++i) moved += (i < b || i >= e) && got_p[k][i] != p0[i];
    EXPECT_EQ(moved, 0u) << name << " shard " << k << " wrote outside its slice";
    for (const ParamEntry& t : table.entries()) {
      const size_t lo = std::max(t.offset, b), hi = std::min(t.offset + t.numel, e);
      if (lo >= hi) continue;
      auto part = [&](const std::vector<float>& x, size_t base) {
        return std::vector<float>(x.begin() + (lo - base), x.begin() + (hi - base));
      };
      for (auto [got, want, base, what] :
           {std::tuple{&got_p[k], &p, size_t(0), "params"}, std::tuple{&got_m[k], &m, b, "m"},
            std::tuple{&got_v[k], &v, b, "v"}}) {
        const testing::ErrorStats s = testing::compare(part(*got, base), part(*want, 0));
        worst = std::max(worst, s.rel());
        EXPECT_LE(s.rel(), 1e-5) << name << " shard " << k << " " << what << " " << t.name;
      }
    }
  }
  std::printf("  %s sharded at %zu, %zu, %zu (empty slice) of %zu: worst per-tensor rel error %.3e\n",
              name.c_str(), cut_w, cut_q, cut_q, n, worst);
}

// Runs without a device: the comparison every parity test here relies on must see a NaN or
// infinite result (an optimizer dividing by a zero norm) instead of dropping it.
TEST(GpuTestUtil, CompareCountsNonFiniteResults) {
  const float nan = std::numeric_limits<float>::quiet_NaN(), inf = std::numeric_limits<float>::infinity();
  const std::vector<float> want = {1.f, -2.f, 0.5f};
  EXPECT_EQ(testing::compare(want, want).rel(), 0.0);
  EXPECT_GT(testing::compare(std::vector<float>{1.f, nan, 0.5f}, want).rel(), 1.0);
  EXPECT_GT(testing::compare(std::vector<float>(3, nan), want).rel(), 1.0);
  EXPECT_GT(testing::compare(std::vector<float>{1.f, -2.f, inf}, want).rel(), 1.0);
  EXPECT_GT(testing::compare(std::vector<float>{1.f, -2.f}, want).rel(), 1.0);
  // Matching non-finite references are exact, and do not hide an error elsewhere (the
  // reference scale comes from its finite values).
  const std::vector<float> special = {inf, nan, 1.f};
  EXPECT_EQ(testing::compare(special, special).rel(), 0.0);
  EXPECT_NEAR(testing::compare(std::vector<float>{inf, nan, 1.5f}, special).rel(), 0.5, 1e-12);
  EXPECT_GT(testing::compare(std::vector<float>{-inf, nan, 1.f}, special).rel(), 1.0);
}

TEST(GpuOptim, ShardedUpdatesMatchCpu) {
  LB_REQUIRE_GPU();
  run_sharded("lans", 1.0);
  run_sharded("lamb", 1e-3);
  run_sharded("adamw", 1e-3);
}

TEST(GpuOptim, LansMatchesCpu) {
  LB_REQUIRE_GPU();
  run_rule("lans", 1.0);
}
TEST(GpuOptim, LambMatchesCpuWithAndWithoutClipping) {
  LB_REQUIRE_GPU();
  run_rule("lamb", 1e-3);  // clips
  run_rule("lamb", 0.0);   // no clipping
  run_rule("lamb", 1e-3, /*trust_ratio_on_excluded=*/true);  // NVLAMB
}
TEST(GpuOptim, AdamWMatchesCpu) {
  LB_REQUIRE_GPU();
  run_rule("adamw", 1e-3);
}

}  // namespace
}  // namespace lansbert
