// Sharded optimizer state (ZeRO-1) against the unsharded single-process update: bert-tiny's
// table (blocks straddle shard boundaries), random parameters equal on every rank and random
// per-rank gradients; each rank also runs the one-rank reference on the average of all ranks'
// gradients. Three steps of LANS and of LAMB (with clipping active); parameters must agree to
// 1e-6 relative (max over elements, against max |p|) and every rank must hold the same model.
// A table smaller than world x alignment checks the layout's edge (the last rank owns all).
#include <random>
#include <vector>

#include "dist_test_util.h"
#include "fd.h"
#include "lansbert/core/check.h"
#include "lansbert/dist/mpi_session.h"
#include "lansbert/dist/sharded_step.h"
#include "lansbert/model/bert_config.h"

using namespace lansbert;

namespace {

std::vector<float> random_vector(const ParamTable& t, uint32_t seed, float scale) {
  std::mt19937 g(seed);
  std::normal_distribution<float> d(0.f, scale);
  std::vector<float> x(t.total_elements(), 0.f);
  for (const ParamEntry& e : t.entries())
    for (size_t i = 0; i < e.numel; ++i) x[e.offset + i] = d(g);
  return x;
}

std::unique_ptr<Updater> make_updater(const std::string& name) {
  UpdaterConfig cfg;
  cfg.optimizer.name = name;
  cfg.optimizer.max_grad_norm = 1.0;
  cfg.schedule.kind = ScheduleKind::kConstant;
  cfg.schedule.peak_lr = 0.01;
  std::unique_ptr<Updater> u;
  Status s = Updater::create(cfg, &u);
  LB_CHECK_MSG(s.is_ok(), s.to_string());
  return u;
}

// Three steps of `name` on `table`, sharded vs the one-rank reference; also checks the layout
// (slices tile the buffer in rank order) and the gradients ShardedStep leaves behind.
void run_table(Communicator& c, testing::Verdict& v, const ParamTable& table, const char* label) {
  const int W = c.world(), R = c.rank();
  const size_t N = table.total_elements();
  for (const char* name : {"lans", "lamb"}) {
    std::vector<float> p = random_vector(table, 7, 0.05f), p_ref = p;
    std::vector<float> m_ref(N, 0.f), v_ref(N, 0.f), g_ref(N);
    std::unique_ptr<Updater> shard_upd = make_updater(name), ref_upd = make_updater(name);
    ShardedStep sharded(table, c, *shard_upd);
    // Slices tile [0, N) in rank order: rank r's begin is rank r-1's end.
    double range[2] = {double(sharded.shard_begin()), double(sharded.shard_end())};
    std::vector<double> all(2 * size_t(W), 0.0);
    all[2 * R] = range[0];
    all[2 * R + 1] = range[1];
    c.all_reduce(all.data(), all.size(), ReduceOp::kSum);
    bool tiles = all[0] == 0 && all[2 * W - 1] == double(N);
    for (int r = 1; r < W; ++r) tiles = tiles && all[2 * r] == all[2 * r - 1];
    v.expect(tiles, std::string(label) + ": shard slices do not tile the buffer");
    std::vector<float> m(sharded.shard_elements(), 0.f), vv(sharded.shard_elements(), 0.f);
    for (int step = 0; step < 3; ++step) {
      // Rank r's gradients; the reference averages all ranks' in rank order.
      std::vector<float> g = random_vector(table, 1000 + 31 * step + R, 0.02f);
      std::fill(g_ref.begin(), g_ref.end(), 0.f);
      for (int r = 0; r < W; ++r) {
        std::vector<float> gr = random_vector(table, 1000 + 31 * step + r, 0.02f);
        for (size_t i = 0; i < N; ++i) g_ref[i] += gr[i];
      }
      for (size_t i = 0; i < N; ++i) g_ref[i] /= float(W);
      StepReport rep, rep_ref;
      Status s = sharded.step(p.data(), g.data(), m.data(), vv.data(), &rep);
      v.expect(s.is_ok() && !rep.skipped, "sharded step failed");
      // The slice holds the averaged gradients (to rounding: with 3 ranks the order of the
      // sum differs from the reference's), everything else 0.
      size_t wrong = 0;
      for (size_t i = 0; i < N; ++i) {
        const bool mine = i >= sharded.shard_begin() && i < sharded.shard_end();
        wrong += mine ? std::fabs(g[i] - g_ref[i]) > 1e-8f : g[i] != 0.f;
      }
      v.expect(wrong == 0, std::string(label) + ": gradients after the step are not the averaged "
                                                "slice and zeros (" + std::to_string(wrong) + " wrong)");
      s = ref_upd->step(table, {p_ref.data(), g_ref.data(), m_ref.data(), v_ref.data()}, &rep_ref);
      v.expect(s.is_ok(), "reference step failed");
      v.expect(testing::rel_diff(rep.stats.grad_norm, rep_ref.stats.grad_norm) < 1e-6,
               std::string(name) + " global grad norm differs");
    }
    double maxp = 0, maxd = 0;
    for (size_t i = 0; i < N; ++i) {
      maxp = std::max(maxp, double(std::fabs(p_ref[i])));
      maxd = lansbert::testing::worse(maxd, double(std::fabs(p[i] - p_ref[i])));
    }
    // Same model on every rank: the max over ranks of the difference to rank 0's copy.
    std::vector<float> p0 = p;
    c.broadcast(p0.data(), N * sizeof(float), 0);
    size_t differ = 0;
    for (size_t i = 0; i < N; ++i) differ += p0[i] != p[i];
    if (R == 0) std::printf("%s, %s sharded on %d ranks (rank 0: [%zu, %zu) of %zu): max |dp| = %.3g, "
                            "max |p| = %.3g, rel %.3g\n", label, name, W, sharded.shard_begin(),
                            sharded.shard_end(), N, maxd, maxp, maxd / maxp);
    v.expect(maxd / maxp < 1e-6, std::string(name) + " sharded != unsharded beyond 1e-6");
    v.expect(differ == 0, std::string(name) + " ranks hold different parameters");
  }
}

}  // namespace

int main() {
  std::unique_ptr<Communicator> c = make_mpi_communicator();
  testing::Verdict v(*c);
  BertConfig cfg;
  LB_CHECK(bert_preset("bert-tiny", &cfg).is_ok());
  run_table(*c, v, make_bert_param_table(cfg), "bert-tiny");
  // Smaller than world * alignment: no whole blocks, the last rank owns everything.
  ParamTable small;
  small.add("w", {5, 7}, ParamRole::kWeight);
  small.add("b", {3}, ParamRole::kBias);
  small.add("ln", {9}, ParamRole::kLayerNormGamma);
  run_table(*c, v, small, "small table");
  return v.finish("sharded optimizer");
}
