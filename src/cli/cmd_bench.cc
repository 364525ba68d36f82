// `lansbert bench`: forward+backward throughput of a BERT preset on random data, the way a
// training step runs it (dropout on, all masked slots used). Reports tokens/s, sequences/s
// and achieved GFLOP/s with the FLOP count of include/lansbert/model/flops.h, and MFU when a
// peak is known or given. `--json` prints one JSON line for scripts.
//
// --backend cuda (builds with CUDA): every timed phase ends with cuda::synchronize() so the
// numbers are device time, not launch time; the device optimizer's update (LANS by default)
// is timed as a third phase; MFU is taken against the peak of the device model found in
// device_description (train/device_peaks.h) for the GEMM precision in use (fp32 or --tf32);
// --batch 0 probes the largest micro-batch whose estimated footprint fits the free memory;
// --attention cudnn|auto runs cuDNN's fused attention (docs/cuda.md), with the model's
// attention dropout applied through lansbert's own keep mask; --attention flash runs
// lansbert's own fused attention (both backends; on the CPU its twin); --gemm-cast cublas lets
// cuBLAS round bf16/fp16 operands inside the GEMM instead of lansbert's cast kernels.
#include <fmt/format.h>
#include <omp.h>

#include <algorithm>
#include <chrono>
#include <functional>
#include <memory>
#include <cstdio>
#include <random>
#include <string>
#include <vector>

#include "bench_batch.h"
#include "bench_footprint.h"
#include "bench_profile.h"
#include "commands.h"
#include "option_checks.h"
#include "lansbert/backend/blas_kernels.h"
#include "lansbert/backend/cpu_ops.h"
#include "lansbert/backend/profiling_ops.h"
#include "lansbert/core/allocator.h"
#include "lansbert/model/bert_model.h"
#include "lansbert/model/flops.h"
#include "lansbert/optim/optimizer.h"
#include "lansbert/train/device_capability.h"
#include "lansbert/train/device_peaks.h"
#ifdef LANSBERT_HAVE_CUDA
#include "cuda_api.h"
#include "cuda_device_backend.h"
#endif

extern "C" void openblas_set_num_threads(int);

namespace lansbert::cli {

namespace {

struct BenchOptions {
  std::string model = "bert-base";
  int seq_len = 128;
  int batch = 8;
  int max_pred = -1;  // default: BERT's 20 per 128 tokens (15% rounded, as NVIDIA's shards)
  int tokens_per_sequence = 0;  // default: seq_len (no padding)
  bool packing = false;         // pack the sequences into shared rows (data.packing)
  int steps = 5;
  int warmup = 1;
  int threads = 0;
  double peak_gflops = 0;
  bool json = false;
  bool comm = false;
  bool profile = false;
  std::string roofline;  // --profile: the GPU model whose roofline floor to print
  std::string recompute = "none";  // none | attention | layers (batch.recompute)
  Recompute recompute_mode = Recompute::kNone;  // parsed
  uint64_t seed = 1;
  std::string backend = "cpu";  // cpu | cuda
  bool tf32 = false;            // cuda: TF32 GEMMs (the same as --precision tf32)
  std::string precision = "fp32";  // GEMM operands: fp32 | tf32 (cuda) | bf16 | fp16 (cpu: emulated)
  GemmMath math = GemmMath::kFp32;  // parsed from the two above
  std::string optimizer;        // time this rule's update ("" = cuda: lans, cpu: none)
  std::string attention = "native";  // native | flash; cuda also cudnn | auto (backend/attention.h)
  std::string gemm_cast = "kernel";  // cuda, bf16/fp16: kernel | cublas (precision.gemm_cast)
  std::string cast_reuse = "on";     // bf16/fp16 with kernel casts: on | off (Ops::keep_gemm_operand)
  std::string activations = "fp32";  // fp32 | 16bit (precision.activations, ModelLimits::half_activations)
  std::string hidden_act = "gelu";   // gelu | gelu_tanh (model.hidden_act)
};

// What differs between the backends: the ops, how to wait for queued work, where the flat
// buffers live and which optimizer updates them.
struct BenchBackend {
  std::unique_ptr<Ops<float>> ops;
  std::function<void()> sync;  // null on the CPU (calls return when the work is done)
  std::string device = "cpu";  // the device's description
  std::function<Status(const std::string&, const OptimizerConfig&, std::unique_ptr<Optimizer>*)> make_optimizer;
  void wait() const {
    if (sync) sync();
  }
};

Status open_backend(const BenchOptions& o, BenchBackend* b) {
  AttentionMode attention;
  if (!parse_attention_mode(o.attention, &attention))
    return Status::invalid_argument("bench: --attention: expected native, cudnn, auto or flash, got '" + o.attention + "'");
  if (o.backend == "cpu") {
    if (o.math == GemmMath::kTf32) return Status::invalid_argument("bench: --tf32 / --precision tf32 needs --backend cuda");
    if (attention != AttentionMode::kNative && attention != AttentionMode::kFlash)
      return Status::invalid_argument("bench: --attention " + o.attention + " needs --backend cuda");
    if (o.gemm_cast != "kernel") return Status::invalid_argument("bench: --gemm-cast " + o.gemm_cast + " needs --backend cuda");
    b->ops = cpu::make_ops<float>(o.math, o.cast_reuse == "on", attention);
    b->make_optimizer = make_optimizer;
    // To stderr: --json keeps stdout to one line.
    if (const std::string w = blas_kernel_warning(); !w.empty()) std::fprintf(stderr, "warning: %s\n", w.c_str());
    return Status::ok();
  }
  if (o.backend != "cuda") return Status::invalid_argument("bench: --backend: expected cpu or cuda, got '" + o.backend + "'");
#ifdef LANSBERT_HAVE_CUDA
  if (cuda::device_count() == 0)
    return Status::unsupported("bench: --backend cuda: " + cuda::no_device_reason());
  LB_RETURN_IF_ERROR(cuda::check_kernel_image(0));
  std::string note;  // to stderr: --json keeps stdout to one line
  LB_RETURN_IF_ERROR(check_gemm_math_on_device(o.math, cuda::compute_capability(0), cuda::device_description(0),
                                               "bench: --precision", "use --precision fp16", &note));
  if (!note.empty()) std::fprintf(stderr, "%s\n", note.c_str());
  cuda::OpsOptions oo;
  oo.math = o.math;
  oo.cast_in_gemm = o.gemm_cast == "cublas";
  oo.reuse_casts = o.cast_reuse == "on";
  if (oo.cast_in_gemm && !is_half_gemm(o.math))
    return Status::invalid_argument("bench: --gemm-cast cublas needs --precision bf16 or fp16");
  oo.attention = attention;
  b->ops = cuda::make_ops(oo);
  b->sync = [] { cuda::synchronize(); };
  b->device = cuda::device_description(0);
  b->make_optimizer = [](const std::string& name, const OptimizerConfig& c, std::unique_ptr<Optimizer>* out) {
    return cuda::make_device_optimizer(name, c, out);
  };
  return Status::ok();
#else
  return Status::unsupported("bench: --backend cuda: this lansbert was built without CUDA (configure with -DLANSBERT_CUDA=ON)");
#endif
}

// Bytes a --batch may take: the host's memory on the CPU, the device's free memory on cuda
// (0 where unknown: no check).
double available_bytes(const std::string& backend) {
  if (backend != "cuda") return host_memory_bytes();
#ifdef LANSBERT_HAVE_CUDA
  size_t free_b = 0, total_b = 0;
  if (cuda::memory_info(&free_b, &total_b)) return double(free_b);
#endif
  return 0;
}

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0 : v[v.size() / 2];
}

int run_bench(const BenchOptions& o) {
  BertConfig cfg;
  Status s = bert_preset(o.model, &cfg);
  if (s.is_ok()) s = parse_hidden_act(o.hidden_act, &cfg.hidden_act);
  if (!s.is_ok()) {
    report(s);
    return exit_code();
  }
  const int L = o.tokens_per_sequence > 0 ? o.tokens_per_sequence : o.seq_len;  // tokens per sequence
  const int P = o.max_pred > 0 ? o.max_pred : std::max(1, (L * 20 + 127) / 128);
  if (s = check_bench_shape(o.seq_len, cfg.max_positions, o.batch, o.steps, L, P); !s.is_ok()) {
    report(s);
    return exit_code();
  }
  const DevicePeak* roofline_device = nullptr;  // --roofline's GPU model
  if (!o.roofline.empty()) {
    s = parse_roofline_device(o.roofline, &roofline_device);
    if (s.is_ok() && !o.profile) s = Status::invalid_argument("bench: --roofline needs --profile");
    if (!s.is_ok()) {
      report(s);
      return exit_code();
    }
  }
  if (o.batch == 0 && o.backend != "cuda") {
    report(Status::invalid_argument("bench: --batch 0 (find the largest micro-batch that fits) needs --backend cuda"));
    return exit_code();
  }
  if (o.threads > 0) {
    omp_set_num_threads(o.threads);
    openblas_set_num_threads(o.threads);
  }
  BenchBackend be;
  s = open_backend(o, &be);
  if (!s.is_ok()) {
    report(s);
    return exit_code();
  }
  const bool fused_attention = o.attention != "native";
  const bool cudnn_staging = fused_attention && o.attention != "flash";
  const bool half = is_half_gemm(o.math);                      // 16-bit GEMM operands
  const bool cast_operands = half && o.gemm_cast != "cublas";  // converted by our kernels (not cuBLAS)
  const std::string opt_name = !o.optimizer.empty() ? o.optimizer : o.backend == "cuda" ? "lans" : "";
  const bool time_opt = !opt_name.empty() && opt_name != "none";
  const bool half_activations = o.activations == "16bit";
  if ((o.activations != "fp32" && !half_activations) || (half_activations && !cast_operands)) {
    report(Status::invalid_argument("bench: --activations: expected fp32, or 16bit with --precision bf16 or fp16 "
                                    "and --gemm-cast kernel; got '" + o.activations + "'"));
    return exit_code();
  }
  int B = o.batch;
  double probe_free = 0, probe_need = 0;
  // Our cast pass: with cast reuse its kept copies, and the arena without fp32 memory for the
  // kept outputs (Ops::kept_outputs_unwritten); without reuse neither.
  const FootprintOptions footprint{time_opt,      fused_attention,     cudnn_staging,
                                   be.ops->attention_runs_flash(cfg.head_dim()),
                                   cast_operands, o.cast_reuse == "on", o.recompute_mode,
                                   half_activations};
  if (B == 0) {
    B = probe_batch(cfg, o.seq_len, P, footprint, &probe_free, &probe_need);
    if (B == 0) {
      report(Status::unsupported("bench: --batch 0: not even a micro-batch of 1 fits in the " +
                                 std::to_string(probe_free) + " GiB free on " + be.device));
      return exit_code();
    }
  } else {
    s = check_batch_fits(cfg, B, o.seq_len, P, footprint, available_bytes(o.backend),
                         o.backend == "cuda" ? "the free memory of " + be.device : "this host's memory");
    if (!s.is_ok()) {
      report(s);
      return exit_code();
    }
  }
  // The profile's traffic model: what GEMMs read per operand element (16-bit where our kernels
  // convert operands; fp32 where cuBLAS converts them inside), and the hand-written
  // attention's GEMMs and softmax as rows of their own.
  ProfilingOps<float> profiler(*be.ops, be.sync, cast_operands ? 2 : int(sizeof(float)));
  profiler.expand_native_attention(!fused_attention);
  // The floor's device: --roofline, else the cuda device where the peak table knows it.
  // (The same table gives MFU's peak below.)
  const DevicePeak* peak = o.backend == "cuda" ? find_device_peak(be.device) : nullptr;
  const DevicePeak* floor_device = roofline_device ? roofline_device : peak;
  const RooflineTarget target{floor_device, o.math, floor_device != nullptr && floor_device == peak};
  profiler.set_roofline(roofline_for(target));
  Ops<float>& ops = o.profile ? static_cast<Ops<float>&>(profiler) : *be.ops;
  BertModel<float> model(cfg, ops, {B, o.seq_len, P, o.recompute_mode, fused_attention, half_activations});
  model.init_params(o.seed);
  Batch batch;
  s = bench_batch(B, o.seq_len, L, P, cfg.vocab_size, o.seed, o.packing, &batch);
  if (!s.is_ok()) {
    report(s);
    return exit_code();
  }
  // The optimizer's moments live where the parameters do.
  std::unique_ptr<Optimizer> opt;
  Buffer<float> m, v;
  if (time_opt) {
    s = be.make_optimizer(opt_name, OptimizerConfig{}, &opt);
    if (!s.is_ok()) {
      report(s);
      return exit_code();
    }
    m = Buffer<float>(model.table().total_elements(), be.ops->allocator());
    v = Buffer<float>(model.table().total_elements(), be.ops->allocator());
    m.zero();
    v.zero();
    // As in training: after the first update, 16-bit GEMMs read the weights from the copy the
    // update writes instead of casting them each step (part of cast reuse; off for the baseline).
    if (cast_operands && o.cast_reuse == "on") model.enable_weight_copy(gemm_half_format(o.math));
  }

  std::vector<double> fwd, bwd, upd;
  double loss = 0;
  size_t casts_before = 0, writes_before = 0;  // GEMM operand conversions, copy writes before the timed steps
  for (int i = 0; i < o.warmup + o.steps; ++i) {
    be.wait();
    const auto t0 = std::chrono::steady_clock::now();
    loss = model.forward(batch, {true, o.seed, uint32_t(i)}).total_loss;
    be.wait();
    const double tf = seconds_since(t0);
    const auto t1 = std::chrono::steady_clock::now();
    model.zero_grads();
    model.backward(1.0f);
    be.wait();
    const double tb = seconds_since(t1);
    double tu = 0;
    if (opt) {
      const auto t2 = std::chrono::steady_clock::now();
      UpdateStats stats;
      FlatBuffers buf{model.params(), model.grads(), m.data(), v.data()};
      buf.half_params = model.weight_copy();
      buf.half_format = model.weight_copy_format();
      opt->update(model.table(), buf, i + 1, 1e-4, &stats);
      model.set_weight_copy_current(true);
      be.wait();
      tu = seconds_since(t2);
    }
    if (i + 1 == o.warmup) {
      profiler.reset();
      casts_before = ops.gemm_operand_conversions();
      writes_before = ops.gemm_operand_copy_writes();
    }
    if (i >= o.warmup) {
      fwd.push_back(tf);
      bwd.push_back(tb);
      upd.push_back(tu);
    }
  }
  const double tf = median(fwd), tb = median(bwd), tu = median(upd), step = tf + tb;
  // Positions computed (padding included) and FLOPs as the trainer counts them: the encoder's
  // per row, the heads' per sequence (model/flops.h).
  const int R = batch.rows;
  const double tokens = double(R) * o.seq_len;
  const double fill = double(B) * L / tokens;
  const double step_flops = bert_packed_train_flops(cfg, R, B, o.seq_len, P);
  const double gflops = step_flops / step / 1e9;
  const int threads = omp_get_max_threads();
  // MFU: against --peak-gflops, else (cuda) the table's peak for the GEMM precision in use.
  const double table_peak = !peak ? 0 : 1e3 * peak_tflops_for(*peak, o.math);
  const double peak_gflops = o.peak_gflops > 0 ? o.peak_gflops : table_peak;
  const double mfu = peak_gflops > 0 ? gflops / peak_gflops : 0;
  const double mfu_half = peak ? gflops / (1e3 * peak->half_tflops) : 0;  // vs dense fp16/bf16
  // 16-bit GEMMs' cast passes: elements per step; each reads 4 bytes and writes 2 (the "6
  // bytes" printed below), and the GEMM reads the 2 back: 4 bytes more than a GEMM reading the
  // fp32 operand directly.
  const double casts = double(ops.gemm_operand_conversions() - casts_before) / o.steps;
  // The 16-bit copies the producing ops wrote in the same pass instead: 2 bytes each.
  const double copy_writes = double(ops.gemm_operand_copy_writes() - writes_before) / o.steps;
  if (o.json) {
    // No peak known for this device (or the CPU): null, as the metrics file leaves it out.
    auto ratio = [](double r) { return r > 0 ? fmt::format("{:.4f}", r) : std::string("null"); };
    std::printf(
        "{\"model\":\"%s\",\"backend\":\"%s\",\"precision\":\"%s\",\"threads\":%d,\"batch\":%d,\"seq_len\":%d,\"max_pred\":%d,"
        "\"params\":%zu,\"forward_ms\":%.3f,\"backward_ms\":%.3f,\"step_ms\":%.3f,\"tokens_per_s\":%.1f,"
        "\"sequences_per_s\":%.2f,\"gflops\":%.2f,\"mfu\":%s,\"loss\":%.5f,\"recompute\":\"%s\","
        "\"activation_bytes\":%zu,\"activations\":\"%s\",\"hidden_act\":\"%s\",\"rows\":%d,\"fill\":%.4f,"
        "\"packing\":%s",
        o.model.c_str(), o.backend.c_str(), gemm_math_name(o.math), threads, B, o.seq_len, P, model.table().parameter_count(), tf * 1e3,
        tb * 1e3, step * 1e3, tokens / step, B / step, gflops, ratio(mfu).c_str(), loss, recompute_name(o.recompute_mode),
        model.activation_bytes(), o.activations.c_str(), hidden_act_name(cfg.hidden_act), R, fill,
        o.packing ? "true" : "false");
    if (opt) std::printf(",\"optimizer\":\"%s\",\"optimizer_ms\":%.3f", opt_name.c_str(), tu * 1e3);
    if (casts > 0)
      std::printf(",\"gemm_cast_elements_per_step\":%.0f,\"gemm_copy_writes_per_step\":%.0f,\"cast_reuse\":\"%s\","
                  "\"kept_copy_bytes\":%zu",
                  casts, copy_writes, o.cast_reuse.c_str(), ops.kept_copy_bytes());
    if (o.backend == "cuda") {
      std::printf(",\"device\":\"%s\",\"attention\":\"%s\",\"gemm_cast\":\"%s\",\"peak_gflops\":%.0f,"
                  "\"mfu_vs_half_peak\":%s",
                  be.device.c_str(), o.attention.c_str(), o.gemm_cast.c_str(), peak_gflops, ratio(mfu_half).c_str());
      if (o.batch == 0)
        std::printf(",\"batch_probed\":true,\"probe_free_gib\":%.2f,\"probe_need_gib\":%.2f", probe_free, probe_need);
    }
    if (o.profile) print_profile_json(profiler, o.steps, step_flops, target);
    std::printf("}\n");
  } else {
    const char* tanh_note = cfg.hidden_act == kern::GeluForm::kTanh ? ", tanh GELU" : "";
    if (o.backend == "cuda")
      std::printf("lansbert bench: %s (%zu parameters), cuda backend on %s, %s GEMMs%s, %s attention%s%s\n",
                  o.model.c_str(), model.table().parameter_count(), be.device.c_str(), gemm_math_name(o.math),
                  o.gemm_cast == "cublas" ? " (operands converted inside cuBLAS)" : "", o.attention.c_str(),
                  half_activations ? ", 16-bit activations" : "", tanh_note);
    else
      std::printf("lansbert bench: %s (%zu parameters), cpu backend, %d threads%s%s%s%s\n", o.model.c_str(),
                  model.table().parameter_count(), threads,
                  o.math == GemmMath::kFp32 ? "" : o.math == GemmMath::kBf16 ? ", bf16 GEMMs emulated" : ", fp16 GEMMs emulated",
                  o.attention == "flash" ? ", flash attention" : "", half_activations ? ", 16-bit activations" : "",
                  tanh_note);
    if (o.batch == 0)
      std::printf("  largest micro-batch that fits: %d (estimated %.2f GiB of %.2f GiB free)\n", B, probe_need,
                  probe_free);
    const std::string timed = o.steps == 1 ? "1 timed step" : "median of " + std::to_string(o.steps) + " steps";
    std::printf("  micro-batch %d x %d tokens, %d masked slots; %s after %d warm-up\n", B, o.seq_len, P,
                timed.c_str(), o.warmup);
    if (fill < 1 || o.packing)
      std::printf("  %d tokens per sequence%s: %d rows, fill %.3f (tokens/s and FLOP/s count the rows' positions)\n",
                  L, o.packing ? ", packed" : ", padded", R, fill);
    std::printf("  forward %.1f ms  backward %.1f ms  step %.1f ms", tf * 1e3, tb * 1e3, step * 1e3);
    if (opt) std::printf("  %s update %.2f ms", opt_name.c_str(), tu * 1e3);
    std::printf("\n  %.0f tokens/s  %.2f sequences/s  %.1f GFLOP/s achieved", tokens / step, B / step, gflops);
    if (mfu > 0) std::printf("  MFU %.1f%%", 100 * mfu);
    if (peak)
      std::printf(" (of %.0f TFLOP/s %s, %s); %.1f%% of the %.0f TFLOP/s dense fp16/bf16 peak", peak_gflops / 1e3,
                  gemm_math_name(o.math), peak->name, 100 * mfu_half, peak->half_tflops);
    else if (o.backend == "cuda" && o.peak_gflops <= 0)
      std::printf("  (device not in the peak table: give --peak-gflops for MFU)");
    std::printf("\n  activations %.1f MiB%s, loss %.4f\n", model.activation_bytes() / 1048576.0,
                o.recompute_mode == Recompute::kLayers      ? " (layers recomputed in the backward, not counted in FLOP/s)"
                : o.recompute_mode == Recompute::kAttention
                    ? (fused_attention ? " (hand-written attention recomputed in the backward, fused layers not; not counted in FLOP/s)"
                                       : " (attention recomputed in the backward, not counted in FLOP/s)")
                                                            : "",
                loss);
    if (casts > 0)
      std::printf("  GEMM operand casts %.1fM elements/step and 16-bit copies written %.1fM (%.2f GB of extra "
                  "traffic at 6 and 2 bytes each), reuse %s; kept copies hold %.1f MiB\n",
                  casts / 1e6, copy_writes / 1e6, (6 * casts + 2 * copy_writes) / 1e9, o.cast_reuse.c_str(),
                  ops.kept_copy_bytes() / 1048576.0);
  }
  if (o.profile && !o.json) print_profile(profiler, o.steps, step, step_flops, target);
  return 0;
}

}  // namespace

void add_bench_command(CLI::App& app) {
  auto o = std::make_shared<BenchOptions>();
  CLI::App* sub = app.add_subcommand("bench", "Measure forward+backward throughput of a BERT preset");
  sub->add_option("--model", o->model, "Preset: bert-tiny, bert-mini, bert-small, bert-medium, bert-base, bert-large")
      ->capture_default_str();
  sub->add_option("--seq-len", o->seq_len, "Tokens per sequence")->capture_default_str();
  sub->add_option("--batch", o->batch, "Sequences per micro-batch (0 with --backend cuda: the largest that fits)")
      ->capture_default_str();
  sub->add_option("--backend", o->backend, "cpu, or cuda (builds with CUDA, a visible device)")->capture_default_str();
  sub->add_option("--precision", o->precision,
                  "GEMM operands: fp32, tf32 (cuda), bf16 or fp16 (fp32 accumulation; on the cpu emulated by rounding)")
      ->check(CLI::IsMember({"fp32", "tf32", "bf16", "fp16"}))
      ->capture_default_str();
  sub->add_flag("--tf32", o->tf32, "cuda: fp32 GEMMs in TF32 on tensor cores (--precision tf32)");
  sub->add_option("--attention", o->attention,
                  "native (default), flash (lansbert's fused attention; the cpu runs its twin), cudnn (cuda: "
                  "cuDNN's fused attention where it applies) or auto (cuda: cudnn, checked against native on "
                  "first use)")
      ->capture_default_str();
  sub->add_option("--gemm-cast", o->gemm_cast,
                  "cuda with bf16/fp16: kernel (cast kernels write 16-bit operands, then cuBLAS) or cublas "
                  "(fp32 operands converted inside cuBLAS, which may pick bf16/fp16 or TF32 kernels: compute type "
                  "32F_FAST_16BF/16F)")
      ->check(CLI::IsMember({"kernel", "cublas"}))
      ->capture_default_str();
  sub->add_option("--cast-reuse", o->cast_reuse,
                  "bf16/fp16 with kernel casts: on (kept operands, the weights and the layers' GEMM inputs are "
                  "cast once per micro-step and reused) or off (every GEMM casts its operands), to compare")
      ->check(CLI::IsMember({"on", "off"}))
      ->capture_default_str();
  sub->add_option("--activations", o->activations,
                  "fp32 (default) or 16bit (bf16/fp16 with kernel casts): store the FFN's activations, the residual "
                  "stream, the LayerNorm input sums and some gradients in the GEMMs' 16-bit format, and use them at "
                  "that rounding (precision.activations)")
      ->capture_default_str();
  sub->add_option("--hidden-act", o->hidden_act,
                  "gelu (erf, default) or gelu_tanh (model.hidden_act; with --activations 16bit the CUDA backend "
                  "takes the tanh GELU in the FFN GEMMs' epilogues)")
      ->capture_default_str();
  sub->add_option("--optimizer", o->optimizer,
                  "Also time this rule's update (lans, lamb, adamw; none to skip). Default: lans on cuda, none on cpu");
  sub->add_option("--tokens-per-sequence", o->tokens_per_sequence,
                  "Tokens of each sequence, the rest of its row padding (default: --seq-len; [CLS] A [SEP] B "
                  "[SEP] needs at least 3)")
      ->check(CLI::Range(3, 1 << 20));
  sub->add_flag("--packing", o->packing,
                "Pack the sequences into shared rows, as data.packing does (with --tokens-per-sequence)");
  sub->add_option("--max-pred", o->max_pred,
                  "Masked-LM slots per sequence (default 20 per 128 tokens of a sequence); a sequence uses at most "
                  "its tokens but 2")
      ->check(CLI::Range(1, 1 << 15));
  sub->add_option("--steps", o->steps, "Timed steps")->capture_default_str();
  sub->add_option("--warmup", o->warmup, "Untimed steps first")->capture_default_str()->check(CLI::Range(0, 1 << 20));
  sub->add_option("--threads", o->threads, "CPU threads (default: OMP_NUM_THREADS or all cores)")
      ->check(CLI::Range(1, 4096));
  sub->add_option("--peak-gflops", o->peak_gflops, "Peak GFLOP/s of this device, to report MFU")
      ->check(number_in(1e-3, 1e12));
  sub->add_option("--seed", o->seed, "Seed for weights, data and dropout")
      ->check(unsigned_seed_check())
      ->capture_default_str();
  sub->add_flag("--json", o->json, "Print one JSON line");
  sub->add_flag("--profile", o->profile,
                "Also print per op: time, GEMM FLOPs, modelled memory traffic and achieved rate (adds a little "
                "overhead)");
  sub->add_option("--roofline", o->roofline,
                  "With --profile: each op's roofline floor on this GPU model (H200, H100 SXM, A100, V100, ...; "
                  "default: the cuda device) and the step's, with the MFU it caps");
  sub->add_option("--recompute", o->recompute,
                  "What the backward recomputes (batch.recompute): none, attention (the probabilities) or layers "
                  "(all but the layers' outputs); FLOP/s and MFU count the model's FLOPs only")
      ->check(CLI::IsMember({"none", "attention", "layers"}))
      ->capture_default_str();
  sub->add_flag("--comm", o->comm,
                 "Measure the communicator instead: all-reduce algbw/busbw over message sizes "
                 "(the defaults of `lansbert bench-comm`, which takes more options)");
  sub->callback([o] {
    if (o->tf32 && o->precision != "fp32" && o->precision != "tf32") {
      report(Status::invalid_argument("bench: --tf32 contradicts --precision " + o->precision));
      set_exit_code(exit_code());
      return;
    }
    (void)parse_recompute(o->recompute, &o->recompute_mode);  // checked by IsMember
    o->math = o->tf32 || o->precision == "tf32" ? GemmMath::kTf32
              : o->precision == "bf16"          ? GemmMath::kBf16
              : o->precision == "fp16"          ? GemmMath::kFp16
                                                : GemmMath::kFp32;
    set_exit_code(o->comm ? run_default_bench_comm() : run_bench(*o));
  });
}

}  // namespace lansbert::cli
