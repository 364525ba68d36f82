// Not a test: the data-parallel update alone, replicated vs sharded (ZeRO-1), interleaved in
// one run so both see the same machine load. Parameter table of a BERT preset, random
// parameters (equal on every rank) and random per-rank gradients, LANS, no model.
//   replicated: GradSync::finish (all buckets reduced at once, nothing to overlap) + Updater
//   sharded:    ShardedStep::step, with its own breakdown (ShardedStepTimes)
// Prints, per mode, the median over ROUNDS of the max over ranks of each part, in ms.
// Usage: mpirun -np N bench_update_dist PRESET [ROUNDS] [BUCKET_MB]
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <string>
#include <vector>

#include "lansbert/core/check.h"
#include "lansbert/dist/grad_sync.h"
#include "lansbert/dist/mpi_session.h"
#include "lansbert/dist/sharded_step.h"
#include "lansbert/model/bert_config.h"

using namespace lansbert;

namespace {

using Clock = std::chrono::steady_clock;
double since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

std::vector<float> random_vector(const ParamTable& t, uint32_t seed, float scale) {
  std::mt19937 g(seed);
  std::normal_distribution<float> d(0.f, scale);
  std::vector<float> x(t.total_elements(), 0.f);
  for (const ParamEntry& e : t.entries())
    for (size_t i = 0; i < e.numel; ++i) x[e.offset + i] = d(g);
  return x;
}

std::unique_ptr<Updater> make_lans() {
  UpdaterConfig cfg;
  cfg.schedule.kind = ScheduleKind::kConstant;
  cfg.schedule.peak_lr = 1e-4;
  std::unique_ptr<Updater> u;
  Status s = Updater::create(cfg, &u);
  LB_CHECK_MSG(s.is_ok(), s.to_string());
  return u;
}

double median(std::vector<double> x) {
  std::sort(x.begin(), x.end());
  return x.empty() ? 0 : x[x.size() / 2];
}

}  // namespace

int main(int argc, char** argv) {
  LB_CHECK_MSG(argc >= 2, "usage: bench_update_dist PRESET [ROUNDS] [BUCKET_MB]");
  const int rounds = argc > 2 ? std::atoi(argv[2]) : 7;
  const double bucket_mb = argc > 3 ? std::atof(argv[3]) : 25;
  std::unique_ptr<Communicator> c = make_mpi_communicator();
  BertConfig cfg;
  LB_CHECK_MSG(bert_preset(argv[1], &cfg).is_ok(), std::string("unknown preset ") + argv[1]);
  const ParamTable table = make_bert_param_table(cfg);
  const size_t N = table.total_elements();
  const std::vector<float> p0 = random_vector(table, 7, 0.05f);
  const std::vector<float> g0 = random_vector(table, 1000 + c->rank(), 0.02f);

  std::vector<float> p_rep = p0, g(N), m_rep(N, 0.f), v_rep(N, 0.f);
  std::unique_ptr<Updater> rep_upd = make_lans();
  GradSync sync(table, g.data(), *c, {size_t(bucket_mb * (1 << 20)), ReduceOp::kAvg, std::nullopt});

  std::vector<float> p_sh = p0;
  std::unique_ptr<Updater> sh_upd = make_lans();
  ShardedStep sharded(table, *c, *sh_upd);
  std::vector<float> m_sh(sharded.shard_elements(), 0.f), v_sh(sharded.shard_elements(), 0.f);

  // Columns: replicated {total, reduce, update}; sharded {total, reduce_scatter, unpack, update,
  // norms, all_gather}.
  constexpr int kCols = 9;
  std::vector<std::vector<double>> cols(kCols);
  for (int round = -1; round < rounds; ++round) {  // round -1 warms up (page faults, plans)
    double x[kCols] = {};
    std::copy(g0.begin(), g0.end(), g.begin());
    c->barrier();
    auto t0 = Clock::now();
    sync.finish();
    x[1] = since(t0);
    auto t1 = Clock::now();
    LB_CHECK(rep_upd->step(table, {p_rep.data(), g.data(), m_rep.data(), v_rep.data()}, nullptr).is_ok());
    x[2] = since(t1);
    x[0] = since(t0);

    std::copy(g0.begin(), g0.end(), g.begin());
    c->barrier();
    t0 = Clock::now();
    LB_CHECK(sharded.step(p_sh.data(), g.data(), m_sh.data(), v_sh.data(), nullptr).is_ok());
    x[3] = since(t0);
    const ShardedStepTimes& st = sharded.last_times();
    x[4] = st.reduce_scatter;
    x[5] = st.unpack;
    x[6] = st.update;
    x[7] = st.norms;
    x[8] = st.all_gather;
    c->all_reduce(x, kCols, ReduceOp::kMax);
    if (round >= 0)
      for (int k = 0; k < kCols; ++k) cols[k].push_back(x[k] * 1e3);
  }
  // The two paths must agree (same math): a wrong speed-up is not one.
  double maxd = 0, maxp = 0;
  for (size_t i = 0; i < N; ++i) {
    maxd = std::max(maxd, double(std::fabs(p_rep[i] - p_sh[i])));
    maxp = std::max(maxp, double(std::fabs(p_rep[i])));
  }
  if (c->rank() == 0) {
    const char* omp = std::getenv("OMP_NUM_THREADS");
    std::printf("%s: %zu elements, %d rank(s), OMP_NUM_THREADS=%s, median of %d rounds, ms "
                "(max over ranks)\n", argv[1], N, c->world(), omp ? omp : "unset", rounds);
    std::printf("  replicated %8.1f = all-reduce %.1f + update %.1f\n", median(cols[0]),
                median(cols[1]), median(cols[2]));
    std::printf("  sharded    %8.1f = reduce-scatter %.1f + unpack %.1f + update %.1f (norm "
                "all-reduces %.1f) + all-gather %.1f\n", median(cols[3]), median(cols[4]),
                median(cols[5]), median(cols[6]), median(cols[7]), median(cols[8]));
    std::printf("  replicated vs sharded parameters: max |dp| %.3g (rel %.3g)\n", maxd, maxd / maxp);
  }
  return 0;
}
