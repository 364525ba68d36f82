// `lansbert bench`: forward+backward throughput of a BERT preset on random data, the way a
// training step runs it (dropout on, all masked slots used). Reports tokens/s, sequences/s
// and achieved GFLOP/s with the FLOP count of include/lansbert/model/flops.h, and MFU when a
// peak is known or given. `--json` prints one JSON line for scripts.
#include <omp.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <random>
#include <string>
#include <vector>

#include "commands.h"
#include "lansbert/backend/cpu_ops.h"
#include "lansbert/backend/profiling_ops.h"
#include "lansbert/model/bert_model.h"
#include "lansbert/model/flops.h"

extern "C" void openblas_set_num_threads(int);

namespace lansbert::cli {

namespace {

struct BenchOptions {
  std::string model = "bert-base";
  int seq_len = 128;
  int batch = 8;
  int max_pred = -1;  // default: BERT's 20 per 128 tokens (15% rounded, as NVIDIA's shards)
  int steps = 5;
  int warmup = 1;
  int threads = 0;
  double peak_gflops = 0;
  bool json = false;
  bool profile = false;
  uint64_t seed = 1;
};

Batch random_full_batch(int B, int S, int P, int vocab, uint64_t seed) {
  std::mt19937_64 g(seed);
  Batch b;
  b.resize(B, S, P);
  for (int i = 0; i < B; ++i) {
    for (int s = 0; s < S; ++s) {
      b.input_ids[size_t(i) * S + s] = s == 0 ? 101 : int(1000 + g() % (vocab - 1000));
      b.segment_ids[size_t(i) * S + s] = s >= S / 2;
      b.input_mask[size_t(i) * S + s] = 1;
    }
    for (int p = 0; p < P; ++p) {
      b.masked_positions[size_t(i) * P + p] = 1 + int(p * (S - 2) / P);
      b.masked_ids[size_t(i) * P + p] = int(1000 + g() % (vocab - 1000));
    }
    b.nsp_labels[i] = i % 2;
  }
  return b;
}

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0 : v[v.size() / 2];
}

// Per-op time per step, largest first, as a share of the (profiled) step.
void print_profile(const ProfilingOps<float>& p, int steps, double step_seconds) {
  std::vector<std::pair<std::string, ProfilingOps<float>::Entry>> rows(p.entries().begin(), p.entries().end());
  std::sort(rows.begin(), rows.end(), [](auto& a, auto& b) { return a.second.seconds > b.second.seconds; });
  std::printf("  %-24s %10s %8s %7s\n", "op", "ms/step", "calls", "share");
  for (const auto& [name, e] : rows)
    std::printf("  %-24s %10.2f %8ld %6.1f%%\n", name.c_str(), 1e3 * e.seconds / steps, e.calls / steps,
                100 * e.seconds / steps / step_seconds);
}

int run_bench(const BenchOptions& o) {
  BertConfig cfg;
  Status s = bert_preset(o.model, &cfg);
  if (!s.is_ok()) {
    report(s);
    return exit_code();
  }
  const int P = o.max_pred > 0 ? o.max_pred : std::max(1, (o.seq_len * 20 + 127) / 128);
  if (o.seq_len > cfg.max_positions || o.seq_len < 2 || o.batch < 1 || o.steps < 1 || P >= o.seq_len) {
    report(Status::invalid_argument("bench: need 2 <= --seq-len <= 512, --batch >= 1, --steps >= 1, --max-pred < --seq-len"));
    return exit_code();
  }
  if (o.threads > 0) {
    omp_set_num_threads(o.threads);
    openblas_set_num_threads(o.threads);
  }
  auto backend = cpu::make_ops<float>();
  ProfilingOps<float> profiler(*backend);
  Ops<float>& ops = o.profile ? static_cast<Ops<float>&>(profiler) : *backend;
  BertModel<float> model(cfg, ops, {o.batch, o.seq_len, P});
  model.init_params(o.seed);
  const Batch batch = random_full_batch(o.batch, o.seq_len, P, cfg.vocab_size, o.seed);

  std::vector<double> fwd, bwd;
  double loss = 0;
  for (int i = 0; i < o.warmup + o.steps; ++i) {
    const auto t0 = std::chrono::steady_clock::now();
    loss = model.forward(batch, {true, o.seed, uint32_t(i)}).total_loss;
    const double tf = seconds_since(t0);
    const auto t1 = std::chrono::steady_clock::now();
    model.zero_grads();
    model.backward(1.0f);
    const double tb = seconds_since(t1);
    if (i + 1 == o.warmup) profiler.reset();
    if (i >= o.warmup) {
      fwd.push_back(tf);
      bwd.push_back(tb);
    }
  }
  const double tf = median(fwd), tb = median(bwd), step = tf + tb;
  const double tokens = double(o.batch) * o.seq_len;
  const double gflops = bert_train_flops(cfg, o.batch, o.seq_len, P) / step / 1e9;
  const int threads = omp_get_max_threads();
  const double mfu = o.peak_gflops > 0 ? gflops / o.peak_gflops : 0;
  if (o.json) {
    std::printf(
        "{\"model\":\"%s\",\"backend\":\"cpu\",\"threads\":%d,\"batch\":%d,\"seq_len\":%d,\"max_pred\":%d,"
        "\"params\":%zu,\"forward_ms\":%.3f,\"backward_ms\":%.3f,\"step_ms\":%.3f,\"tokens_per_s\":%.1f,"
        "\"sequences_per_s\":%.2f,\"gflops\":%.2f,\"mfu\":%.4f,\"loss\":%.5f}\n",
        o.model.c_str(), threads, o.batch, o.seq_len, P, model.table().parameter_count(), tf * 1e3, tb * 1e3,
        step * 1e3, tokens / step, o.batch / step, gflops, mfu, loss);
  } else {
    std::printf("lansbert bench: %s (%zu parameters), cpu backend, %d threads\n", o.model.c_str(),
                model.table().parameter_count(), threads);
    std::printf("  micro-batch %d x %d tokens, %d masked slots; median of %d steps after %d warm-up\n", o.batch,
                o.seq_len, P, o.steps, o.warmup);
    std::printf("  forward %.1f ms  backward %.1f ms  step %.1f ms\n", tf * 1e3, tb * 1e3, step * 1e3);
    std::printf("  %.0f tokens/s  %.2f sequences/s  %.1f GFLOP/s achieved", tokens / step, o.batch / step, gflops);
    if (mfu > 0) std::printf("  MFU %.1f%%", 100 * mfu);
    std::printf("\n  activations %.1f MiB, loss %.4f\n", model.activation_bytes() / 1048576.0, loss);
  }
  if (o.profile) print_profile(profiler, o.steps, step);
  return 0;
}

}  // namespace

void add_bench_command(CLI::App& app) {
  auto o = std::make_shared<BenchOptions>();
  CLI::App* sub = app.add_subcommand("bench", "Measure forward+backward throughput of a BERT preset");
  sub->add_option("--model", o->model, "Preset: bert-tiny, bert-mini, bert-small, bert-medium, bert-base, bert-large")
      ->capture_default_str();
  sub->add_option("--seq-len", o->seq_len, "Tokens per sequence")->capture_default_str();
  sub->add_option("--batch", o->batch, "Sequences per micro-batch")->capture_default_str();
  sub->add_option("--max-pred", o->max_pred, "Masked-LM slots per sequence (default 20 per 128 tokens)");
  sub->add_option("--steps", o->steps, "Timed steps")->capture_default_str();
  sub->add_option("--warmup", o->warmup, "Untimed steps first")->capture_default_str();
  sub->add_option("--threads", o->threads, "CPU threads (default: OMP_NUM_THREADS or all cores)");
  sub->add_option("--peak-gflops", o->peak_gflops, "Peak GFLOP/s of this device, to report MFU");
  sub->add_option("--seed", o->seed, "Seed for weights, data and dropout")->capture_default_str();
  sub->add_flag("--json", o->json, "Print one JSON line");
  sub->add_flag("--profile", o->profile, "Also print time per op (adds a little overhead)");
  sub->callback([o] { set_exit_code(run_bench(*o)); });
}

}  // namespace lansbert::cli
