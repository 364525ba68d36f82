// Data parallelism end to end, without the trainer: bert-tiny BertModel<float> on the CPU
// backend, one global batch of 4 micro-batches split across 1, 2 or 4 ranks, forward and
// backward per micro-batch (GradSync reduces the buckets from the backward hook on the last
// micro-step), then a LANS update, for 3 steps. Rank 0 also runs the same 3 steps alone
// (every micro-batch, one process). The first step's averaged gradients and the parameters
// after 3 steps must agree with it up to summation-order rounding (tolerances and why: see
// kGradBlockTol). Then the same with the ZeRO-1 ShardedStep instead of a replicated Updater.
//
// Bench mode (not a test): --bench PRESET MICRO_BATCH SEQ STEPS measures the step time per
// rank (weak scaling: every rank runs its own micro-batch), the time of the gradient
// all-reduce alone, and how much of it backward hides.
#include <chrono>
#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include "dist_test_util.h"
#include "lansbert/core/check.h"
#include "lansbert/backend/cpu_ops.h"
#include "lansbert/dist/grad_sync.h"
#include "lansbert/dist/mpi_session.h"
#include "lansbert/dist/sharded_step.h"
#include "lansbert/model/bert_model.h"
#include "model_test_util.h"
#include "tensor_diff.h"

using namespace lansbert;

namespace {

constexpr int kMicro = 4, kB = 2, kS = 32, kP = 5, kSteps = 3;
// Tolerances. The per-tensor ones are about 10x the worst summation-order difference measured
// between 1 and 2 or 4 ranks (packed q/k/v GEMM, bert-tiny, this seed); real faults (a lost
// micro-batch, a sum instead of a mean, a misplaced bucket or shard) differ by 1e-2 or more.
// The overall one is issue 6's bar (1e-6 relative in fp32).
// - Step-0 gradients, per tensor: measured 2.35e-6 at cls.seq_relationship.bias (two values,
//   each a sum over the batch of terms of both signs).
// - Parameters after 3 LANS steps, per tensor: measured 5.0e-6 at layer 0's
//   attention.output.LayerNorm.bias. LANS divides m by sqrt(v) + eps (eps = 1e-6), so where a
//   gradient cancels to about eps (element 88: 5.77e-7, differing by 1.4e-10 between 1 and 2
//   ranks) the update moves by lr / eps per unit of gradient.
// - Parameters, max |d| / max |p| over all tensors: measured 1.42e-7 (2 ranks), 5.45e-7 (4).
// The gradient check is the exact one (same parameters, only the summation order differs);
// LANS is invariant to a gradient scale, so a mean/sum mistake shows only there.
constexpr double kGradBlockTol = 2e-5, kParamBlockTol = 5e-5, kParamGlobalTol = 1e-6;
using Clock = std::chrono::steady_clock;
double since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

std::unique_ptr<Updater> make_lans() {
  UpdaterConfig cfg;
  cfg.schedule.kind = ScheduleKind::kConstant;
  cfg.schedule.peak_lr = 0.01;
  std::unique_ptr<Updater> u;
  Status s = Updater::create(cfg, &u);
  LB_CHECK_MSG(s.is_ok(), s.to_string());
  return u;
}

Batch micro_batch(int step, int j, int vocab) {
  return testing::random_batch(kB, kS, kP, vocab, uint32_t(100 + step * kMicro + j));
}

// Runs micro-batches [first, first+count) of each step; returns the parameters. With
// first_grads, also the first step's gradients after the all-reduce (replicated only: the
// sharded step reduces into shards inside ShardedStep::step).
std::vector<float> train(Communicator& comm, int first, int count, bool sharded,
                         std::vector<float>* first_grads = nullptr) {
  BertConfig cfg;
  LB_CHECK(bert_preset("bert-tiny", &cfg).is_ok());
  auto ops = cpu::make_ops<float>();
  BertModel<float> model(cfg, *ops, {kB, kS, kP});
  model.init_params(42);
  const ParamTable& t = model.table();
  const size_t N = t.total_elements();
  std::unique_ptr<Updater> upd = make_lans();
  std::unique_ptr<ShardedStep> zero;
  if (sharded) zero = std::make_unique<ShardedStep>(t, comm, *upd);
  const size_t state = sharded ? zero->shard_elements() : N;
  std::vector<float> m(state, 0.f), v(state, 0.f);
  GradSync sync(t, model.grads(), comm, {size_t(256) << 10, ReduceOp::kAvg});
  for (int step = 0; step < kSteps; ++step) {
    model.zero_grads();
    for (int j = first; j < first + count; ++j) {
      model.forward(micro_batch(step, j, cfg.vocab_size), {true, 1, uint32_t(step * kMicro + j)});
      const bool last = j == first + count - 1;
      if (!sharded) sync.begin(last);
      model.backward(1.0f / count, sharded ? nullptr : sync.hook());
    }
    StepReport rep;
    Status s;
    if (sharded) {
      s = zero->step(model.params(), model.grads(), m.data(), v.data(), &rep);
    } else {
      sync.finish();
      if (step == 0 && first_grads) first_grads->assign(model.grads(), model.grads() + N);
      s = upd->step(t, {model.params(), model.grads(), m.data(), v.data()}, &rep);
    }
    LB_CHECK_MSG(s.is_ok() && !rep.skipped, s.to_string());
  }
  return std::vector<float>(model.params(), model.params() + N);
}

// Compares got with ref tensor by tensor: ||got - ref|| <= block_tol * ||ref|| per tensor;
// returns max |got - ref| / max |ref| over the compared tensors. The attention key biases are
// reported, not compared: their true gradient is exactly zero (softmax is invariant to a
// per-row shift), so their fp32 gradient is rounding noise, which LANS normalises into
// lr-sized steps. Another summation order gives other noise and other values, with no effect
// on the model's outputs.
double compare_tensors(testing::Verdict& v, const ParamTable& table, const std::vector<float>& got,
                       const std::vector<float>& ref, double block_tol, const char* what) {
  double maxd = 0, maxr = 0, worst = 0;
  std::string worst_name;
  for (const ParamEntry& e : table.entries()) {
    const testing::TensorDiff t = testing::tensor_diff(got.data() + e.offset, ref.data() + e.offset, e.numel);
    if (testing::has_zero_true_gradient(e.name)) {
      std::printf("  not compared: %s %s ||d||/||ref|| = %.3g (zero true gradient)\n", what,
                  e.name.c_str(), t.rel);
      continue;
    }
    maxd = std::max(maxd, t.max_abs_diff);
    maxr = std::max(maxr, t.max_abs_ref);
    if (t.rel > worst) worst = t.rel, worst_name = e.name;
    char msg[64];
    std::snprintf(msg, sizeof msg, " relative difference %.3g above %.0e", t.rel, block_tol);
    v.expect(t.rel <= block_tol, std::string(what) + " " + e.name + msg);
  }
  std::printf("  %s: worst per-tensor ||d||/||ref|| %.3g (%s)\n", what, worst, worst_name.c_str());
  return maxr > 0 ? maxd / maxr : maxd;
}

int run_test(Communicator& c, bool sharded) {
  testing::Verdict v(c);
  const int W = c.world();
  LB_CHECK_MSG(kMicro % W == 0, "rank count must divide 4");
  const int k = kMicro / W;
  std::vector<float> g;
  std::vector<float> p = train(c, c.rank() * k, k, sharded, sharded ? nullptr : &g);
  std::vector<float> p0 = p;
  c.broadcast(p0.data(), p0.size() * sizeof(float), 0);
  size_t differ = 0;
  for (size_t i = 0; i < p.size(); ++i) differ += p0[i] != p[i];
  v.expect(differ == 0, "ranks hold different parameters");
  if (c.rank() == 0) {
    std::unique_ptr<Communicator> single = make_single_process_communicator();
    std::vector<float> g_ref;
    std::vector<float> ref = train(*single, 0, kMicro, false, &g_ref);
    BertConfig cfg;
    LB_CHECK(bert_preset("bert-tiny", &cfg).is_ok());
    const ParamTable table = make_bert_param_table(cfg);
    if (!sharded) compare_tensors(v, table, g, g_ref, kGradBlockTol, "step-0 gradient");
    const double glob = compare_tensors(v, table, p, ref, kParamBlockTol, "parameter");
    size_t exact = 0;
    for (size_t i = 0; i < p.size(); ++i) exact += p[i] == ref[i];
    std::printf("%s, %d rank(s) vs 1 process: max |dp| / max |p| %.3g, %zu of %zu identical\n",
                sharded ? "sharded" : "replicated", W, glob, exact, p.size());
    v.expect(glob < kParamGlobalTol, "parameters differ from the single-process run beyond 1e-6");
  }
  return v.finish(sharded ? "model data-parallel (sharded)" : "model data-parallel");
}

// Weak-scaling step time: every rank one micro-batch of B x S per step.
int run_bench(Communicator& c, const char* preset, int B, int S, int steps) {
  BertConfig cfg;
  LB_CHECK(bert_preset(preset, &cfg).is_ok());
  auto ops = cpu::make_ops<float>();
  BertModel<float> model(cfg, *ops, {B, S, 20});
  model.init_params(42);
  const ParamTable& t = model.table();
  const size_t N = t.total_elements();
  std::unique_ptr<Updater> upd = make_lans();
  std::vector<float> m(N, 0.f), v(N, 0.f);
  GradSync sync(t, model.grads(), c, {size_t(4) << 20, ReduceOp::kAvg});
  const Batch batch = testing::random_batch(B, S, 20, cfg.vocab_size, 5 + c.rank());
  double step_s = 0, fwd_bwd_s = 0, wait_s = 0, comm_s = 0, upd_s = 0;
  for (int step = -1; step < steps; ++step) {  // step -1 warms up
    c.barrier();
    const auto t0 = Clock::now();
    model.zero_grads();
    model.forward(batch, {true, 1, uint32_t(step + 1)});
    sync.begin(true);
    model.backward(1.0f, sync.hook());
    const double fb = since(t0);
    sync.finish();
    const auto t1 = Clock::now();
    LB_CHECK(upd->step(t, {model.params(), model.grads(), m.data(), v.data()}, nullptr).is_ok());
    const double u = since(t1), total = since(t0);
    // The same all-reduce alone (what overlap has to hide).
    c.barrier();
    const auto t2 = Clock::now();
    c.all_reduce(model.grads(), N, ReduceOp::kAvg);
    const double comm = since(t2);
    if (step >= 0) {
      step_s += total; fwd_bwd_s += fb; wait_s += sync.last_wait_seconds(); comm_s += comm; upd_s += u;
    }
  }
  double vals[5] = {step_s / steps, fwd_bwd_s / steps, wait_s / steps, comm_s / steps, upd_s / steps};
  c.all_reduce(vals, 5, ReduceOp::kMax);
  if (c.rank() == 0) {
    std::printf("bench %s B=%d S=%d params=%zu ranks=%d: step %.1f ms (fwd+bwd %.1f, exposed "
                "comm %.1f, update %.1f); all-reduce alone %.1f ms; hidden %.0f%%\n",
                preset, B, S, t.parameter_count(), c.world(), vals[0] * 1e3, vals[1] * 1e3,
                vals[2] * 1e3, vals[4] * 1e3, vals[3] * 1e3,
                c.world() > 1 ? 100.0 * std::max(0.0, 1.0 - vals[2] / vals[3]) : 0.0);
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  std::shared_ptr<MpiSession> session = MpiSession::acquire();
  std::unique_ptr<Communicator> c = make_mpi_communicator();
  if (argc > 1 && std::strcmp(argv[1], "--bench") == 0) {
    LB_CHECK_MSG(argc == 6, "--bench PRESET MICRO_BATCH SEQ STEPS");
    return run_bench(*c, argv[2], std::atoi(argv[3]), std::atoi(argv[4]), std::atoi(argv[5]));
  }
  return run_test(*c, /*sharded=*/false) | run_test(*c, /*sharded=*/true);
}
