// `lansbert train`: loads the phase's YAML config (with --set overrides), and either prints
// the resolved config and plan (--dry-run) or runs the trainer. Under mpirun/srun every rank
// runs this; make_communicator() picks MPI then, the single-process communicator otherwise.
// Only rank 0 prints. Bad input exits non-zero before anything is written.
#include <fmt/format.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <string>

#include "commands.h"
#include "option_checks.h"
#include "lansbert/core/byte_text.h"
#include "lansbert/core/check.h"
#include "lansbert/config/config_loader.h"
#include "lansbert/data/blend.h"
#include "lansbert/data/dataset.h"
#include "lansbert/dist/communicator.h"
#include "lansbert/dist/mpi_session.h"
#include "lansbert/train/checkpoint.h"
#include "lansbert/train/data_parallel.h"
#include "lansbert/train/device_capability.h"
#include "lansbert/train/device_peaks.h"
#include "lansbert/train/evaluate.h"
#include "lansbert/train/trainer.h"

namespace lansbert::cli {
namespace {

struct TrainArgs {
  std::string config;
  std::vector<std::string> sets;
  bool dry_run = false;
  int world = 0;               // --world: plan for this many ranks (--dry-run; 0: this job's)
  double device_memory = 0;    // --device-memory GiB: the largest micro-batch that fits (--dry-run)
  std::string gpu;             // --gpu MODEL: check the precision against it (--dry-run)
  std::string resume, init_from;
  int64_t stop_at_step = -1;
};

double gib(double bytes) { return bytes / (1024.0 * 1024 * 1024); }

// What --resume and --init-from mean for this start of the run. --resume auto is one command
// line for every start of a job that is stopped and started again (a requeued Slurm job, a
// spot instance, a restarted pod): it resumes from checkpoint.dir when that holds a checkpoint
// (a 'latest' pointer, even a broken one, or a step-* directory: what is there is resumed or
// reported, never started over), and otherwise starts the phase, from --init-from when given.
struct StartPlan {
  std::string resume, init_from;
  std::string note;  // what --resume auto decided, for the log
};

Status plan_start(const TrainArgs& a, const TrainConfig& cfg, StartPlan* out) {
  out->resume = a.resume;
  out->init_from = a.init_from;
  if (a.resume != "auto") {
    if (!a.resume.empty() && !a.init_from.empty())
      return Status::invalid_argument("--resume " + a.resume + " excludes --init-from: a resume continues a run, "
                                      "--init-from starts one (--resume auto does whichever applies: it resumes "
                                      "when checkpoint.dir holds a checkpoint)");
    return Status::ok();
  }
  namespace fs = std::filesystem;
  const std::string& dir = cfg.checkpoint.dir;
  const std::string said = "--resume auto: ";
  // A checkpoint.dir that cannot be read (a network file system's error, a permission) is not
  // an empty one: the run must not start over what may be there.
  std::error_code ec;
  auto unreadable = [&](const std::string& what) {
    return Status::io_error(said + what + ": " + ec.message() + "; not starting the run over what may be there");
  };
  const fs::file_status root = fs::status(dir, ec);
  // A file where the directory (or one of its parents) should be is the config's error, as a
  // start without auto reports it (exit 2), not a file-system one to retry.
  if (ec == std::errc::not_a_directory || (fs::exists(root) && !fs::is_directory(root))) {
    LB_RETURN_IF_ERROR(check_checkpoint_root(dir, INT64_MAX));
    return Status::invalid_argument("checkpoint.dir: " + dir + " is not a directory");
  }
  if (ec && ec != std::errc::no_such_file_or_directory) return unreadable("checkpoint.dir " + dir + " cannot be read");
  // A symlink to nothing is not an empty directory either.
  if (!fs::exists(root) && fs::is_symlink(fs::symlink_status(dir, ec)))
    return Status::invalid_argument(said + "checkpoint.dir " + dir + " is a symlink to " +
                                    fs::read_symlink(dir, ec).string() + ", which is not there: not starting the run "
                                    "elsewhere than its checkpoints may be");
  if (fs::exists(root)) {
    fs::directory_iterator listing(dir, ec);
    if (ec) return unreadable("checkpoint.dir " + dir + " cannot be listed");
  }
  bool has[2] = {false, false};  // latest, final
  for (int i = 0; i < 2; ++i) {
    const fs::path p = fs::path(dir) / (i == 0 ? "latest" : "final");
    has[i] = fs::exists(fs::symlink_status(p, ec));
    if (ec && ec != std::errc::no_such_file_or_directory) return unreadable(p.string() + " cannot be read");
  }
  const std::vector<std::string> steps = checkpoint_step_dirs(dir);
  if (!has[0] && !steps.empty()) {
    std::string newest = steps.front();
    for (const std::string& n : steps)
      if (checkpoint_step_of(n) > checkpoint_step_of(newest)) newest = n;
    return Status::invalid_argument(said + dir + " holds " + newest + " but no 'latest' pointer (a run stopped "
                                    "between writing a checkpoint and pointing to it?): resume from it with --resume " +
                                    dir + "/" + newest + " (without --init-from), which writes 'latest' again");
  }
  if (!has[0] && has[1])
    return Status::invalid_argument(said + dir + " holds a 'final' pointer but no 'latest' and no checkpoint: not "
                                    "starting the run over what was there; move " + dir + "/final away to start it");
  if (!has[0]) {
    out->resume.clear();
    out->note = said + dir + " holds no checkpoint: starting the run" +
                (a.init_from.empty() ? "" : " from --init-from " + a.init_from);
    return Status::ok();
  }
  // What the resume will read, found now, so that the note (and the dry run's start line) says
  // what the run does: a 'latest' that is no symlink, or points to no checkpoint, is the error
  // --resume latest would give.
  LB_RETURN_IF_ERROR(check_checkpoint_root(dir, INT64_MAX));
  std::string found;
  LB_RETURN_IF_ERROR(resolve_checkpoint(dir, &found).with_prefix(said));
  out->resume = "latest";
  out->init_from.clear();
  out->note = said + dir + " holds a checkpoint (" + fs::path(found).filename().string() + "): resuming it" +
              (a.init_from.empty() ? "" : " (--init-from " + a.init_from + " is where the run began; not read)");
  return Status::ok();
}

void print_plan(const TrainConfig& cfg, const TrainPlan& p) {
  std::printf("%s\n", config_to_json(cfg, 2).c_str());
  std::printf("plan:\n");
  std::printf("  world size          : %d\n", p.world);
  std::printf("  micro-batch per rank: %d%s\n", cfg.batch.micro_batch,
              cfg.batch.recompute == Recompute::kLayers      ? " (encoder layers recomputed in the backward)"
              : cfg.batch.recompute == Recompute::kAttention ? " (attention probabilities recomputed in the backward)"
                                                             : "");
  std::printf("  accumulation        : %d micro-batch%s per update\n", p.accumulation, p.accumulation == 1 ? "" : "es");
  std::printf("  global batch        : %lld sequences of %d tokens\n", (long long)cfg.batch.global_batch,
              cfg.data.seq_len);
  std::printf("  steps               : %lld\n", (long long)p.steps);
  std::printf("  sequences           : %lld\n", (long long)p.sequences);
  std::printf("  tokens              : %lld (%.3g)\n", (long long)p.tokens, double(p.tokens));
  std::printf("  parameters          : %zu (%.1fM)\n", p.parameters, p.parameters / 1e6);
  std::printf("  training FLOPs      : %.3g per sequence, %.3g total\n", p.flops_per_sequence,
              p.flops_per_sequence * double(p.sequences));
  if (cfg.data.packing)
    std::printf("  packing             : the FLOPs above are of unpacked rows; data.packing computes fewer rows, "
                "as the data's padding allows (lansbert prep prints its share)\n");
  std::printf("  memory per rank     : %.3f GiB flat buffers (params, grads, m, v%s; fp32) + %.3f GiB "
              "16-bit copies + %.3f GiB activations = %.3f GiB\n",
              gib(p.flat_bytes), cfg.distributed.shard_optimizer ? " sharded" : "", gib(p.half_bytes),
              gib(p.activation_bytes), gib(p.bytes_per_rank()));
  if (p.world > 1)
    std::printf("  gradient reduction  : %s, %.3f GiB per update\n", cfg.distributed.grad_reduce_dtype.c_str(),
                gib(p.reduce_bytes));
}

// One checkpoint's size, the free space where checkpoint.dir is (or would be) and, when the
// run's checkpoints would not fit there, the warning the run prints at its start.
void print_checkpoint_space(const TrainConfig& cfg, const TrainPlan& p) {
  const std::string& dir = cfg.checkpoint.dir;
  const uint64_t moments = p.checkpoint_bytes - 4 * uint64_t(p.parameters);
  uint64_t free_bytes = 0;
  std::string warning;
  const bool known = checkpoint_room(dir, p.checkpoint_bytes, cfg.checkpoint.keep_last, &free_bytes, &warning);
  std::printf("  checkpoint size     : about %s (weights %s, moments %s%s); %s\n", byte_text(p.checkpoint_bytes).c_str(),
              byte_text(4 * uint64_t(p.parameters)).c_str(), byte_text(moments).c_str(),
              cfg.distributed.shard_optimizer ? ", in one slice per rank" : "",
              known ? (byte_text(free_bytes) + " free there").c_str() : "free space unknown there");
  if (!warning.empty()) std::printf("  WARNING             : %s\n", warning.c_str());
  if (cfg.checkpoint.async)  // the copies a background write works from (background_checkpoint.h)
    std::printf("  checkpoint.async    : rank 0 holds copies of the weights and moments (about %s of host memory) "
                "while it writes a checkpoint\n",
                byte_text(p.checkpoint_bytes).c_str());
}

// --device-memory: the largest micro_batch whose plan fits `gib` on one device, for each
// recomputation setting. A micro_batch must divide each rank's share of the global batch (the
// accumulation is whole), so only those divisors are tried. Plans are lower bounds: the
// GEMMs' and cast workspaces come on top.
void print_fitting_micro_batch(const TrainConfig& cfg, int world, double device_gib) {
  const double have = device_gib * 1073741824.0;
  const int64_t share = cfg.batch.global_batch % world == 0 ? cfg.batch.global_batch / world : 0;
  std::printf("  on a device of %.1f GiB (plans are lower bounds: cuBLAS and cast workspaces come on top)\n",
              device_gib);
  for (Recompute recompute : {Recompute::kNone, Recompute::kAttention, Recompute::kLayers}) {
    TrainConfig c = cfg;
    c.batch.recompute = recompute;
    int64_t found = 0;
    TrainPlan plan;
    for (int64_t m = std::min<int64_t>(share, 1 << 16); m >= 1 && !found; --m) {
      if (share % m) continue;
      c.batch.micro_batch = int(m);
      if (make_plan(c, world, &plan).is_ok() && double(plan.bytes_per_rank()) <= have)
        found = m;
    }
    const std::string how = std::string("batch.recompute: ") + recompute_name(recompute);
    if (found)
      std::printf("    %-26s: micro_batch %lld fits (plan %.2f GiB; accumulation %d)\n", how.c_str(), (long long)found,
                  gib(double(plan.bytes_per_rank())), plan.accumulation);
    else
      std::printf("    %-26s: no micro_batch dividing the %lld sequences per rank fits\n", how.c_str(), (long long)share);
  }
}

// --gpu: the config's precision on that GPU model, as the trainer's start-up check would judge
// it there (device_capability.h): a refusal is this dry run's error, before anything is
// printed; otherwise *lines says what runs.
Status check_gpu_model(const TrainConfig& cfg, const std::string& gpu, std::string* lines) {
  const DevicePeak* p = find_device_peak(gpu);
  if (!p) return Status::invalid_argument("--gpu: unknown GPU model '" + gpu + "' (known: " + device_peak_names() + ")");
  const std::string device = std::string(p->name) + " (sm_" + std::to_string(p->compute_capability) + ")";
  std::string note;
  LB_RETURN_IF_ERROR(check_config_precision_on_device(cfg, p->compute_capability, device, &note));
  *lines = fmt::format("  GPU                 : {}: {} GEMMs run{}\n", device, gemm_math_name(cfg.gemm_math()),
                       note.empty() ? "" : " (" + note + ")");
  const AttentionMode a = cfg.attention_mode();
  if (a != AttentionMode::kNative && a != AttentionMode::kFlash && p->compute_capability < 80)
    *lines += fmt::format("  attention           : precision.attention {}: cuDNN's fused attention needs sm_80+, the "
                          "hand-written attention runs\n", attention_mode_name(a));
  if (a == AttentionMode::kFlash && cfg.gemm_math() != GemmMath::kBf16 && cfg.gemm_math() != GemmMath::kFp16)
    *lines += fmt::format("  attention           : precision.attention flash runs on tensor cores with 16-bit GEMMs; "
                          "with {} GEMMs the hand-written attention runs\n", gemm_math_name(cfg.gemm_math()));
  return Status::ok();
}

// A shard set's line in the dry run's plan.
std::string shards_line(const char* key, const ShardSet& set) {
  return fmt::format("  {:<20}: {} file{}, {} samples of {} tokens, {} masked slots\n", key, set.num_shards(),
                     set.num_shards() == 1 ? "" : "s", set.count(), set.seq_len(), set.max_pred());
}

// A blend's lines (data.weights): each source's samples, the share of the run's samples its
// weight gives it, and how many times over the run reads it in schedule.total_steps.
std::string blend_lines(const TrainConfig& cfg, const ShardSet& set, const BlendSchedule* blend_or_null) {
  if (!blend_or_null) return "";
  const BlendSchedule& blend = *blend_or_null;
  const uint64_t run_samples = uint64_t(cfg.schedule.total_steps) * uint64_t(cfg.batch.global_batch);
  const std::vector<uint64_t> picks = blend.picks_before(run_samples);
  std::string out;
  for (size_t s = 0; s < blend.sources(); ++s) {
    const int64_t size = set.source_sizes()[s];
    out += fmt::format("  {:<20}: {} ({} samples), weight {}: {:.2f}% of the samples, {:.2f} epochs of it in {} steps\n",
                       fmt::format("  data.train[{}]", s), cfg.data.train[s], size, cfg.data.weights[s],
                       100.0 * blend.share(s) / BlendSchedule::kPeriod, size ? double(picks[s]) / double(size) : 0.0,
                       cfg.schedule.total_steps);
  }
  return out;
}

// The named held-out sets' lines (evaluation.names): each entry's samples and how many of them
// every evaluation reads.
std::string eval_set_lines(const TrainConfig& cfg, const ShardSet& set) {
  std::string out;
  const std::vector<EvalSet> parts = eval_sets(set, cfg.evaluation.names, cfg.evaluation.max_sequences, "data.eval");
  for (size_t i = 0; i < cfg.evaluation.names.size(); ++i)
    out += fmt::format("  {:<20}: {} ({} samples): set {}, {} evaluated\n", fmt::format("  data.eval[{}]", i),
                       cfg.data.eval[i], set.source_sizes()[i], cfg.evaluation.names[i], parts[i].end - parts[i].begin);
  return out;
}

// --dry-run opens the shards too (headers and index), so that a glob matching nothing shows
// up before the job waits in a queue. A plan made before the data exists is still a plan:
// files not found are reported on the line, not as a failure. Files found but refused (a
// damaged header, two shapes in one set) are the run's error, as they would be at start-up.
std::string describe_shards(const char* key, const std::vector<std::string>& globs, const ShardSetOptions& so,
                            Status* status) {
  std::unique_ptr<ShardSet> set;
  *status = ShardSet::open(globs, so, &set).with_prefix(std::string(key) + ": ");
  if (status->code() == StatusCode::kNotFound)
    return fmt::format("  {:<20}: NOT READABLE here, a run would stop: {}\n", key, status->message());
  if (!status->is_ok()) return fmt::format("  {:<20}: refused (the error below)\n", key);
  return shards_line(key, *set);
}

// The dry run's lines on data.train, data.eval and the trainer's start-up checks of them, and
// the first error a run would stop on (a set not found here is not one: its line says so).
struct DataLines {
  std::string text;
  Status refused;
};

DataLines describe_data(const TrainConfig& cfg, Communicator& comm, const TrainOptions& check) {
  auto data_line = [](const Status& st) {
    return fmt::format("  {:<20}: {}\n", "data check",
                       st.is_ok() ? "the shards fit the config and the model"
                       : st.code() == StatusCode::kNotFound ? "NOT READABLE here, a run would stop: " + st.message()
                                                            : "refused (the error below)");
  };
  // The usual case, everything readable and right, opens each file once (thousands of HDF5
  // files on a shared file system are real load).
  OpenedShardSets opened;
  const Status whole = check_training_data(cfg, comm, check, &opened);
  if (whole.is_ok())
    return {shards_line("data.train", *opened.train) + blend_lines(cfg, *opened.train, opened.blend.get()) +
                (opened.eval ? shards_line("data.eval", *opened.eval) + eval_set_lines(cfg, *opened.eval) : "") +
                data_line(whole),
            Status::ok()};
  // Something is missing or wrong: each set opened on its own says which, and data.train is
  // checked even where data.eval is not found here.
  Status train_status, eval_status, data_status;
  DataLines out;
  out.text = describe_shards("data.train", cfg.data.train, shard_set_options(cfg, true), &train_status);
  if (!cfg.data.eval.empty())
    out.text += describe_shards("data.eval", cfg.data.eval, shard_set_options(cfg, false), &eval_status);
  if (train_status.is_ok() && (eval_status.is_ok() || eval_status.code() == StatusCode::kNotFound)) {
    TrainConfig readable = cfg;
    if (!eval_status.is_ok()) readable.data.eval.clear();
    data_status = eval_status.is_ok() ? whole : check_training_data(readable, comm, check);
    out.text += data_line(data_status);
  }
  for (const Status* st : {&train_status, &eval_status, &data_status})
    if (out.refused.is_ok() && !st->is_ok() && st->code() != StatusCode::kNotFound) out.refused = *st;
  return out;
}

Status run_train_on(const TrainArgs& a, std::unique_ptr<Communicator>& comm) {
  TrainConfig cfg;
  // --world plans for a job of that size from one process (a cluster's config checked here).
  if (a.world > 0 && comm->world() > 1 && a.world != comm->world())
    return Status::invalid_argument("--world " + std::to_string(a.world) + " differs from this job's " +
                                    std::to_string(comm->world()) + " ranks");
  const int world = a.world > 0 ? a.world : comm->world();
  LB_RETURN_IF_ERROR(load_train_config(a.config, a.sets, world, &cfg));
  StartPlan start;
  LB_RETURN_IF_ERROR(plan_start(a, cfg, &start));
  if (a.dry_run) {
    TrainPlan plan;
    LB_RETURN_IF_ERROR(make_plan(cfg, world, &plan));
    std::string gpu_lines;
    if (!a.gpu.empty()) LB_RETURN_IF_ERROR(check_gpu_model(cfg, a.gpu, &gpu_lines));
    Status refused;  // rank 0's: data found and refused, which a run would stop on
    if (comm->rank() == 0) {
      // As the trainer opens them and checks them (shape and masking against data.*, the
      // vocabulary against model.vocab_size, the batch against the samples, every held-out
      // sample read), so that a plan that prints is a run that starts. On rank 0 only: the
      // others print nothing, and thousands of HDF5 files times the ranks is real load.
      TrainOptions check;
      check.resume = start.resume;
      check.init_from = start.init_from;
      const DataLines data = describe_data(cfg, *comm, check);
      print_plan(cfg, plan);
      std::printf("%s", data.text.c_str());
      std::printf("  checkpoints         : %s (metrics: %s; TensorBoard: %s)\n", cfg.checkpoint.dir.c_str(),
                  cfg.metrics_path().empty() ? "none" : cfg.metrics_path().c_str(),
                  cfg.tensorboard_path().empty() ? "none" : cfg.tensorboard_path().c_str());
      if (!start.note.empty()) std::printf("  start               : %s\n", start.note.c_str());
      print_checkpoint_space(cfg, plan);
      std::printf("%s", gpu_lines.c_str());
      if (a.device_memory > 0) print_fitting_micro_batch(cfg, world, a.device_memory);
      refused = data.refused;
    }
    return refused;
  }
  // The config names the reduction order; the world size was needed to validate it. The new
  // communicator shares the MPI session of the first, which is released after.
  if (comm->world() > 1 && reduction_order(cfg.distributed) != ReductionOrder::kNative) {
    CommOptions co;
    co.order = reduction_order(cfg.distributed);
    comm = make_communicator(co);
  }
  TrainOptions opts;
  // Each rank decides from what it sees; the ranks' views of the job compare the outcome
  // (a rank whose checkpoint.dir is another is refused, as with --resume latest).
  opts.resume = start.resume;
  opts.init_from = start.init_from;
  if (comm->rank() == 0 && !start.note.empty()) std::printf("note: %s\n", start.note.c_str());
  opts.stop_at_step = a.stop_at_step;
  opts.log = comm->rank() == 0 ? stdout : nullptr;
  TrainResult result;
  LB_RETURN_IF_ERROR(run_training(cfg, *comm, opts, &result));
  if (comm->rank() == 0) {
    std::printf("done: step %lld, checkpoint %s\n", (long long)result.step, result.checkpoint.c_str());
    if (!result.stopped_by_signal && result.step < result.total_steps)
      std::printf("stopped by --stop-at-step at step %lld of %lld; resume with --resume latest\n",
                  (long long)result.step, (long long)result.total_steps);
    const double t = result.t_total;
    if (t > 0)
      std::printf("time: %.1fs total; shares: compute %.1f%%, optimizer %.1f%%, all-reduce %.1f%%, "
                  "data wait %.1f%%, checkpoint %.1f%%, logging %.1f%%\n",
                  t, 100 * result.t_compute / t, 100 * result.t_optimizer / t, 100 * result.t_allreduce / t,
                  100 * result.t_data / t, 100 * result.t_checkpoint / t, 100 * result.t_logging / t);
  }
  return Status::ok();
}

// A failure on one rank (its config, files or data) would leave the others waiting in a
// collective forever; under mpirun it therefore ends the whole job through the fatal path
// (MPI_Abort), naming the rank, the host and the cause (abort_job: no source location, as it
// is no program bug).
Status run_train(const TrainArgs& a) {
  std::unique_ptr<Communicator> comm = make_communicator();
  Status st = run_train_on(a, comm);
  if (!st.is_ok() && comm->world() > 1)
    abort_job(st.to_string(), st.exit_code());
  return st;
}

}  // namespace

void add_train_command(CLI::App& app) {
  auto a = std::make_shared<TrainArgs>();
  CLI::App* sub = app.add_subcommand("train", "Pretrain BERT for one phase described by a YAML config");
  sub->add_option("--config", a->config, "YAML config of the phase")->required();
  sub->add_option("--set", a->sets, "Override a config key: key.path=value (repeatable)");
  CLI::Option* dry = sub->add_flag("--dry-run", a->dry_run, "Print the resolved config and plan, then exit");
  sub->add_option("--world", a->world,
                  "With --dry-run: validate and plan for this many ranks (e.g. 1536 for 192 nodes of 8 GPUs)")
      ->check(CLI::Range(1, 1 << 20))
      ->needs(dry);
  sub->add_option("--device-memory", a->device_memory,
                  "With --dry-run: GiB of one device; print the largest batch.micro_batch whose plan fits, "
                  "for each batch.recompute setting")
      ->check(number_in(0.01, 1e6))
      ->needs(dry);
  sub->add_option("--gpu", a->gpu,
                  "With --dry-run: check the precision settings against this GPU model (V100, A100, H100, H200), "
                  "as a run there would at start-up")
      ->needs(dry);
  CLI::Option* resume =
      sub->add_option("--resume", a->resume,
                      "Continue exactly: 'latest' (in checkpoint.dir), a checkpoint directory, or 'auto': resume "
                      "when checkpoint.dir holds a checkpoint, else start (from --init-from when given)");
  CLI::Option* init = sub->add_option("--init-from", a->init_from,
                                      "Start from the weights of a lansbert checkpoint or a Hugging Face directory (phase 2)");
  sub->add_option("--stop-at-step", a->stop_at_step, "Stop (with a checkpoint) after this step")
      ->check(CLI::Range(int64_t(0), int64_t(1) << 40));
  // An empty path (an unset shell variable, say) would otherwise mean "start from scratch".
  for (CLI::Option* o : {resume, init})
    o->check(CLI::Validator([](std::string& v) { return v.empty() ? std::string("an empty path") : std::string(); },
                            "PATH"));
  sub->callback([a] { report(run_train(*a)); });
}

}  // namespace lansbert::cli
