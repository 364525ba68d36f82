// run_training: the setup (data, model, optimizer, restore) and the step loop. The pieces
// that cross ranks live in DataParallel (data_parallel.h): the bucketed gradient all-reduce
// hooked into backward, or the sharded (ZeRO-1) update, and collective checkpoints. The data
// checks are in trainer_data.cc, resume and saving in trainer_restore.cc (trainer_run.h).
#include "lansbert/train/trainer.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <filesystem>

#include "lansbert/backend/blas_kernels.h"
#include "lansbert/backend/cpu_ops.h"
#include "lansbert/core/allocator.h"
#include "lansbert/core/file_io.h"
#include "lansbert/core/stop_signals.h"
#include "lansbert/data/vocab.h"
#include "lansbert/model/flops.h"
#include "lansbert/optim/noise_scale.h"
#include "lansbert/train/checkpoint.h"
#include "lansbert/train/device_peaks.h"
#include "lansbert/train/device_ranks.h"
#include "lansbert/train/rank_agreement.h"
#include "device_run.h"
#include "trainer_run.h"

namespace lansbert {
namespace trainer_detail {

double now_s() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

Status Run::check_outputs() {
  // Rank 0 writes both (and its creation probes must not race another rank's).
  const Status st = rank0() ? lock_and_check_outputs() : Status::ok();
  return agree_across_ranks(comm, st, "checking checkpoint.dir and the logging outputs", &Status::invalid_argument);
}

// A checkpoint.dir that exists is locked before its checkpoints are looked at, so that a run
// started beside another one is refused as such rather than told that the other's
// checkpoints are an earlier run's. A new one is made (by the lock) only once every check has
// passed: a refused run creates nothing. A run refused after it took the lock puts the lock
// file's earlier record back (DirLock::abandon), so it leaves the directory as it found it.
Status Run::lock_and_check_outputs() {
  const std::string& dir = cfg.checkpoint.dir;
  const int64_t resumed = opts.resume.empty() ? -1 : step;
  auto lock = [&] {
    std::string unlocked;
    Status st = checkpoint_lock.acquire(dir, "checkpoint.dir", DirLock::holder_record("lansbert train"), &unlocked);
    if (!unlocked.empty() && opts.log) std::fprintf(opts.log, "note: %s\n", unlocked.c_str());
    return st;
  };
  auto checks = [&] {
    LB_RETURN_IF_ERROR(check_checkpoint_root(dir, resumed));
    if (!cfg.metrics_path().empty()) {
      LB_RETURN_IF_ERROR(check_can_create(cfg.metrics_path(), PathKind::kFile, "logging.metrics_file"));
      LB_RETURN_IF_ERROR(check_metrics_file(cfg.metrics_path()));
    }
    if (!cfg.tensorboard_path().empty())
      LB_RETURN_IF_ERROR(check_can_create(cfg.tensorboard_path(), PathKind::kDirectory, "logging.tensorboard_dir"));
    return Status::ok();
  };
  LB_RETURN_IF_ERROR(check_can_create(dir, PathKind::kDirectory, "checkpoint.dir"));
  std::error_code ec;
  const bool existed = std::filesystem::is_directory(dir, ec);
  if (existed) LB_RETURN_IF_ERROR(lock());
  Status st = checks();
  if (st.is_ok() && !existed) {
    LB_RETURN_IF_ERROR(lock());
    st = check_checkpoint_root(dir, resumed);  // another run may have made it (and written) first
  }
  if (!st.is_ok()) {
    checkpoint_lock.abandon();
    return st;
  }
  // Room for the checkpoints: said now, not hours in when one fails (a warning only, as free
  // space comes and goes and network file systems report it loosely).
  uint64_t free_bytes = 0;
  std::string warning;
  if (opts.log &&
      checkpoint_room(dir, checkpoint_bytes_estimate(model->table()), cfg.checkpoint.keep_last, &free_bytes, &warning) &&
      !warning.empty())
    std::fprintf(opts.log, "warning: %s\n", warning.c_str());
  return Status::ok();
}

Status Run::evaluate(MetricsLog& log, int64_t total, double* seconds, Status* logged) {
  const double t0 = now_s();
  std::vector<EvalSums> sums;
  // A named set's refusal names its entry already ("data.eval[1] (books): ...").
  const Status evaluated =
      evaluate_sets_on_ranks(*model, *eval_shards, eval_parts, cfg.batch.micro_batch, cfg.data.packing, comm, &sums);
  if (!evaluated.is_ok())
    return evaluated.message().rfind("data.eval[", 0) == 0 ? evaluated : evaluated.with_prefix("data.eval: ");
  EvalSums all;
  result->eval_sets.clear();
  for (const EvalSums& s : sums) {
    all += s;
    if (!cfg.evaluation.names.empty()) result->eval_sets.push_back(s.result());
  }
  result->eval = all.result();
  ++result->evaluations;
  *seconds = now_s() - t0;
  *logged = agree_across_ranks(
      comm, log.write_eval(step, total, result->eval, *seconds, cfg.evaluation.names, result->eval_sets),
      "writing the metrics", &Status::io_error);
  return Status::ok();
}

Status Run::end_diverged(const std::string& message, int64_t good_before) {
  // A checkpoint still being written in the background first: it may be the one to name.
  const Status background = finish_checkpoint();
  std::string newest;
  for (const std::string& n : checkpoint_step_dirs(cfg.checkpoint.dir))
    if (checkpoint_step_of(n) < good_before) newest = n;
  const std::string before = good_before == INT64_MAX ? "" : " before step " + std::to_string(good_before);
  const std::string none_here = cfg.checkpoint.dir + " holds no checkpoint" + before + ": ";
  const std::string advice =
      !newest.empty()           ? "resume from the newest checkpoint" + before + " (--resume " + cfg.checkpoint.dir +
                                      "/" + newest + ")"
      : !opts.resume.empty()    ? none_here + "resume again from --resume " + opts.resume
      : !opts.init_from.empty() ? none_here + "start again from --init-from " + opts.init_from +
                                      " in another checkpoint.dir"
                                : none_here + "start again in another checkpoint.dir";
  return Status::diverged(message + advice + " with a lower optimizer.lr (--set optimizer.lr=...)" +
                          (background.is_ok() ? "" : "; and the " + background.message()));
}

// A metrics file that cannot take another line (a full disk, a quota, a file size limit), a
// data.train record that cannot be read (a damaged shard, a file system's I/O error) or a
// failed evaluation ends the run, but not the training since the last checkpoint with it.
// The exit code stays the error's.
Status Run::stop_after_checkpoint(const Status& failed, const std::string& fix) {
  // A checkpoint still being written in the background ends first; if it failed, this step's
  // is written in the foreground below (finish_checkpoint forgets saved_step).
  const Status background = finish_checkpoint();
  const std::string also = background.is_ok() ? "" : "; and the " + background.message();
  auto with = [&](const std::string& more) {
    return Status::with_code(failed.code(), failed.message() + also + more);
  };
  if (step == first_step)  // nothing trained in this run, nothing to keep
    return with("; " + fix + ", then " + (opts.resume.empty() ? "start the run again" : "resume it again"));
  if (saved_step != step) {
    const Status saved = save(step == cfg.schedule.total_steps);
    if (!saved.is_ok()) return with("; and the " + saved.message());
  }
  return with("; the run stopped after step " + std::to_string(step) + " with its checkpoint written (" +
              result->checkpoint + "): " + fix + " and continue with --resume latest");
}

constexpr const char* kCheckpointFix = "make room in checkpoint.dir (or point it at a file system with room)";
constexpr const char* kMetricsFix =
    "make room for the file it names (logging.metrics_file or logging.tensorboard_dir), or point it elsewhere";

Status Run::loop() {
  first_step = step;
  const int64_t total = cfg.schedule.total_steps;
  const int64_t stop_at = opts.stop_at_step >= 0 ? std::min(opts.stop_at_step, total) : total;
  // MFU against the devices' dense peak for this run's GEMMs, where the device is in the table
  // (every rank is taken to hold the same model as rank 0).
  const DevicePeak* peak = device ? find_device_peak(device->description()) : nullptr;
  const double peak_tflops = peak ? peak_tflops_for(*peak, cfg.gemm_math()) * comm.world() : 0;
  MetricsLog log(rank0() ? opts.log : nullptr, rank0() ? cfg.metrics_path() : "",
                 rank0() ? cfg.tensorboard_path() : "", step + 1);
  MetricsWindow win;
  Batch batch;
  MicroBatchInfo info;
  StepReport report;
  // The trust ratios of the window's last applied update (a step the loss scaler skipped has
  // none): what its record reports.
  std::vector<double> trust, trust_grad;
  double t_window = now_s(), t_last_ckpt = now_s();
  const double t_start = now_s();
  double w_data = 0, w_compute = 0, w_allreduce = 0, w_opt = 0;
  bool first_window = true;
  int64_t nonfinite_since = -1;  // the first step of a run of steps with a non-finite loss
  // logging.noise_scale: exponential moving sums of this rank's |G_b|², of |G_B|² and of the
  // weights, over about noise_scale_updates updates (the paper's averaging; a window of a few
  // updates alone is too noisy). A resumed run starts them afresh.
  double noise_avg[3] = {0, 0, 0};
  const double noise_decay = 1 - 1.0 / double(cfg.logging.noise_scale_updates);
  while (step < stop_at) {
    model->zero_grads();
    bool loss_finite = true;  // this rank's micro-steps of this step
    double small_sq = std::nan("");  // logging.noise_scale: |G_b|² of this rank's first micro-batch
    for (int k = 0; k < accum; ++k) {
      double t0 = now_s();
      // Agreed before the forward pass, whose collectives a rank without a batch would miss.
      const Status read = agree_across_ranks(comm, loader->next(&batch, &info), "reading data.train", nullptr);
      if (!read.is_ok())
        return stop_after_checkpoint(read, "mend or replace the shard it names (lansbert prep writes it again)");
      const double t1 = now_s();
      // Dropout keys by the micro-batch's index in the global batch (rank r holds indices
      // r*accum ...), so the masks of a sample do not depend on the rank count.
      const uint64_t key = micro + uint64_t(comm.rank()) * accum + k;
      const ForwardResult r = model->forward(batch, StepContext{true, cfg.seed, uint32_t(key)});
      dp->begin_micro_step(k == accum - 1);
      // The loss is scaled by the scaler's current scale (1 unless loss scaling is on), so
      // small fp16 gradients survive the GEMMs; the Updater divides it out before the update.
      const float grad_factor = float(updater->loss_scale()) / float(accum);
      model->backward(grad_factor, dp->backward_hook());
      // Charge the queued kernels to compute, not the optimizer; a device communicator's
      // reductions are waited for in dp->step (the all-reduce share).
      if (device) device->synchronize_compute(*ops);
      // The buffer holds the first micro-batch's gradient alone (times grad_factor), not yet
      // reduced: accumulation is 2 or more with noise_scale (validated).
      if (cfg.logging.noise_scale && k == 0) {
        const double s = device ? device->gradient_sum_squares(model->table(), model->grads())
                                : gradient_sum_squares(model->table(), model->grads());
        small_sq = s / (double(grad_factor) * double(grad_factor));
      }
      w_data += t1 - t0;
      w_compute += now_s() - t1;
      win.add(r, batch);
      loss_finite = loss_finite && std::isfinite(r.total_loss);
      if (info.last) pos = info.next;
    }
    micro += uint64_t(accum) * comm.world();
    double t0 = now_s(), t_reduce = 0;
    if (Status st = dp->step(flat(), &report, &t_reduce); !st.is_ok()) {
      if (st.code() != StatusCode::kDiverged) return st;
      // Deterministic: resumed unchanged, the run diverges at the same step again.
      return end_diverged("step " + std::to_string(step + 1) + ": " + st.message() +
                          ". Resumed unchanged the run diverges here again; ", INT64_MAX);
    }
    if (!report.skipped) {
      model->set_weight_copy_current(true);  // the update wrote it (if enabled)
      trust.swap(report.stats.trust_ratio);
      trust_grad.swap(report.stats.trust_ratio_grad);
      // A skipped update's gradients overflowed: no norm of them counts.
      const double big_sq = report.stats.grad_norm * report.stats.grad_norm;
      if (std::isfinite(small_sq) && std::isfinite(big_sq)) {
        for (auto [sum, v] : {std::pair{&noise_avg[0], small_sq}, {&noise_avg[1], big_sq}, {&noise_avg[2], 1.0}})
          *sum = noise_decay * *sum + v;
        win.sums[MetricsWindow::kNoiseSteps] += 1;
      }
    }
    w_allreduce += t_reduce;
    w_opt += now_s() - t0 - t_reduce;
    ++step;
    if (opts.after_step) opts.after_step(step);

    // Decisions every rank must agree on: stop (a signal), a timed checkpoint, whether rank
    // 0's checkpoint in the background has ended (its outcome is then taken at once), and
    // whether any rank's loss was not finite.
    double flags[4] = {double(stop_signal() != 0),
                       double(cfg.checkpoint.every_minutes > 0 &&
                              now_s() - t_last_ckpt >= 60 * cfg.checkpoint.every_minutes),
                       double(writing && writing->finished()), double(!loss_finite)};
    comm.all_reduce(flags, 4, ReduceOp::kMax);
    // Steps whose loss was not finite (their updates skipped, every rank alike): the weights
    // of the last applied update give it. Mid-run they are left to the loss scaler's limits
    // (and a resumed run goes on counting them); the run's last step must not end in one:
    // `final` would be weights that give NaN, passing for a trained model. Checked first, so
    // that no error path below writes that checkpoint.
    nonfinite_since = flags[3] != 0 && report.skipped ? (nonfinite_since < 0 ? step : nonfinite_since) : -1;
    if (step == total && nonfinite_since >= 0)
      return end_diverged(
          "step " + std::to_string(step) + ": the loss has not been finite since step " +
          std::to_string(nonfinite_since) + " (its updates skipped): the weights of step " +
          std::to_string(nonfinite_since - 1) + "'s update give non-finite values, so no final checkpoint is "
          "written, and checkpoints from step " + std::to_string(nonfinite_since - 1) + " on hold those weights: ",
          nonfinite_since - 1);
    // A failed write in the background: this step's checkpoint in the foreground, then stop.
    if (flags[2] != 0)
      if (const Status w = finish_checkpoint(); !w.is_ok()) return stop_after_checkpoint(w, kCheckpointFix);

    if (step % cfg.logging.every_steps == 0 || step == stop_at || flags[0] != 0) {
      const double tl = now_s();
      // The moving sums join the window's (each rank's, added over the ranks: the mean of the
      // ranks' |G_b|² over the same weights).
      win.sums[MetricsWindow::kNoiseSmall] = noise_avg[0];
      win.sums[MetricsWindow::kNoiseBig] = noise_avg[1];
      win.sums[MetricsWindow::kNoiseWeight] = noise_avg[2];
      win.all_reduce(comm);
      const double dt = tl - t_window, seqs = win.sums[MetricsWindow::kSequences];
      MetricsRecord rec;
      rec.step = step;
      rec.total_steps = total;
      rec.loss = win.mean_loss();
      rec.mlm_loss = win.sums[MetricsWindow::kMlmLoss] / win.sums[MetricsWindow::kMicro];
      rec.nsp_loss = win.sums[MetricsWindow::kNspLoss] / win.sums[MetricsWindow::kMicro];
      rec.mlm_accuracy = win.mlm_accuracy();
      rec.nsp_accuracy = win.nsp_accuracy();
      rec.lr = report.lr;
      rec.grad_norm = report.stats.grad_norm;
      rec.trust = summarize_trust_ratios(trust, model->table());
      rec.trust_grad = summarize_trust_ratios(trust_grad, model->table());
      rec.loss_scale = report.loss_scale;
      if (const double w = win.sums[MetricsWindow::kNoiseWeight]; w > 0) {
        rec.noise_steps = int64_t(win.sums[MetricsWindow::kNoiseSteps]) / comm.world();
        rec.noise = estimate_noise_scale(win.sums[MetricsWindow::kNoiseSmall] / w,
                                         win.sums[MetricsWindow::kNoiseBig] / w, cfg.batch.micro_batch,
                                         double(cfg.batch.global_batch));
      }
      rec.skipped = updater->state().skipped_steps;
      rec.seq_per_s = seqs / dt;
      // Positions and FLOPs as computed: R rows of S positions (fewer rows than sequences when
      // packed), the heads once per sequence.
      const double rows = win.sums[MetricsWindow::kRows], positions = rows * cfg.data.seq_len;
      rec.tokens_per_s = positions / dt;
      rec.fill = positions > 0 ? win.sums[MetricsWindow::kTokens] / positions : 0;
      rec.tflops = bert_packed_train_flops(mc, rows, seqs, cfg.data.seq_len, cfg.data.max_pred) / dt / 1e12;
      rec.mfu = peak_tflops > 0 ? rec.tflops / peak_tflops : 0;
      rec.elapsed_s = tl - t_start;
      rec.eta_s = double(stop_at - step) * cfg.batch.global_batch / std::max(rec.seq_per_s, 1e-9);
      rec.eta_step = stop_at;
      rec.t_data = w_data / dt;
      rec.t_compute = w_compute / dt;
      rec.t_allreduce = w_allreduce / dt;
      rec.t_optimizer = w_opt / dt;
      rec.t_other = std::max(0.0, 1 - rec.t_data - rec.t_compute - rec.t_allreduce - rec.t_optimizer);
      const Status logged = agree_across_ranks(comm, log.write(rec), "writing the metrics", &Status::io_error);
      if (!logged.is_ok()) return stop_after_checkpoint(logged, kMetricsFix);
      if (first_window) result->first_loss = rec.loss;
      first_window = false;
      result->loss = rec.loss;
      result->mlm_accuracy = rec.mlm_accuracy;
      result->nsp_accuracy = rec.nsp_accuracy;
      result->t_data += w_data;
      result->t_compute += w_compute;
      result->t_allreduce += w_allreduce;
      result->t_optimizer += w_opt;
      win = MetricsWindow{};
      trust.clear();
      trust_grad.clear();
      w_data = w_compute = w_allreduce = w_opt = 0;
      result->t_logging += now_s() - tl;
      t_window = now_s();
    }
    // The checkpoint first, so that an evaluation that fails (a corrupt data.eval record)
    // loses no training.
    // Not periodic or timed ones of weights that give a non-finite loss (with keep_last they
    // would push out the good ones); a stop writes its step's whatever it holds, to resume.
    const bool periodic = cfg.checkpoint.every_steps > 0 && step % cfg.checkpoint.every_steps == 0;
    if (((periodic || flags[1] != 0) && nonfinite_since < 0) || flags[0] != 0 || step == stop_at) {
      // In the background (checkpoint.async) unless the run ends here: the last checkpoint is
      // on disk when the run returns.
      const bool ends = flags[0] != 0 || step == stop_at;
      if (const Status w = finish_checkpoint(); !w.is_ok()) return stop_after_checkpoint(w, kCheckpointFix);
      LB_RETURN_IF_ERROR(save(step == total, cfg.checkpoint.async && !ends));
      t_last_ckpt = now_s();
    }
    // Held-out evaluation: every evaluation.every_steps and when the run reaches its last
    // step (not when a signal or --stop-at-step ends it early: a resumed run then evaluates
    // where an uninterrupted one would have). Its time is kept out of the next window's
    // throughput.
    const bool eval_due = cfg.evaluation.every_steps > 0 && step % cfg.evaluation.every_steps == 0;
    if (eval_shards && (eval_due || step == total) && flags[0] == 0) {
      double seconds = 0;
      Status logged;
      const Status evaluated = evaluate(log, total, &seconds, &logged);
      if (!evaluated.is_ok())
        return stop_after_checkpoint(evaluated, "mend data.eval (or set evaluation.every_steps: 0 and no data.eval)");
      if (!logged.is_ok()) return stop_after_checkpoint(logged, kMetricsFix);
      t_window += seconds;
    }
    if (flags[0] != 0) {
      result->stopped_by_signal = true;
      if (opts.log && rank0())
        std::fprintf(opts.log, "lansbert: stopped by %s after step %lld; checkpoint %s; resume with --resume latest\n",
                     signal_name(stop_signal()), (long long)step, result->checkpoint.c_str());
      break;
    }
  }
  // No write is under way here: the checkpoint of the step a run ends on is never in the background.
  if (step >= stop_at && result->checkpoint.empty()) LB_RETURN_IF_ERROR(save(step == total));
  result->step = step;
  result->total_steps = total;
  result->micro_step = micro;
  result->t_total = now_s() - t_start;
  return Status::ok();
}

// The CPU backend allocates everything up front: a model or micro-batch that cannot fit in
// this host's memory (with the ranks sharing it) is a config error named here, not a failed
// allocation deep inside the model.
Status check_host_memory(const TrainConfig& cfg, Communicator& comm) {
  TrainPlan plan;
  LB_RETURN_IF_ERROR(make_plan(cfg, comm.world(), &plan));
  return check_plan_fits(cfg, plan, host_memory_bytes(), std::max(comm.local_world(), 1), "this host's memory");
}

}  // namespace trainer_detail

Status check_training_data(const TrainConfig& cfg, Communicator& comm, const TrainOptions& opts,
                           OpenedShardSets* opened) {
  trainer_detail::Run run(cfg, comm, opts);
  LB_RETURN_IF_ERROR(cfg.resolve_model(&run.mc));
  std::vector<bool> is_continuation;
  LB_RETURN_IF_ERROR(run.open_data(&is_continuation));
  if (opened) *opened = OpenedShardSets{std::move(run.shards), std::move(run.eval_shards), std::move(run.blend)};
  return Status::ok();
}

Status run_training(const TrainConfig& cfg, Communicator& comm, const TrainOptions& opts,
                    TrainResult* result) {
  using trainer_detail::check_host_memory;
  // From here a stop signal is kept (a big model's start-up, its data and a resume's reads,
  // takes minutes): the run then stops after its first step, with a checkpoint.
  StopSignals guard(opts.handle_signals);
  trainer_detail::Run run(cfg, comm, opts);
  run.result = result;
  *result = TrainResult{};
  LB_RETURN_IF_ERROR(cfg.resolve_model(&run.mc));
  run.accum = int(cfg.batch.global_batch / (int64_t(cfg.batch.micro_batch) * comm.world()));
  std::vector<bool> is_continuation;
  LB_RETURN_IF_ERROR(run.open_data(&is_continuation));
  nlohmann::json view;
  LB_RETURN_IF_ERROR(run.view_of_the_job(&view));
  const nlohmann::json& seen = view["shards"];
  run.train_data = {{"samples", seen["train_samples"]}, {"files", seen["train_files"]}, {"digest", seen["train_digest"]}};
  // A blend's sources, each by its size and sample digest: a resume with its entries in
  // another order is refused by them.
  if (seen.contains("train_source_samples")) {
    run.train_data["source_samples"] = seen["train_source_samples"];
    run.train_data["source_digests"] = seen["train_source_digests"];
  }
  // Which vocabulary the ids mean, for a later phase's --init-from to compare (lansbert shards
  // record it; NVIDIA's HDF5 ones do not).
  if (run.shards->info()) run.train_data["vocab_hash"] = vocab_hash_text(run.shards->info()->vocab_hash);
  LB_RETURN_IF_ERROR(check_same_as_rank0(comm, view,
                                         "resolved config, command line or view of the shards",
                                         "every rank must read the same config file contents with the same --set "
                                         "options and the same shards"));
  if (cfg.backend == "cpu") LB_RETURN_IF_ERROR(check_host_memory(cfg, comm));
  if (cfg.backend != "cpu") LB_RETURN_IF_ERROR(open_device(cfg, comm, opts, &run.device));
  run.ops = run.device ? run.device->make_ops(DeviceOptions{cfg.gemm_math(), cfg.attention_mode(), cfg.cast_in_gemm()})
                       : cpu::make_ops<float>(cfg.gemm_math(), true, cfg.backend_attention_mode());
  if (!run.device && opts.log && comm.rank() == 0) {
    if (const std::string w = blas_kernel_warning(); !w.empty()) std::fprintf(opts.log, "warning: %s\n", w.c_str());
  }
  if (!run.device && cfg.gemm_math() != GemmMath::kFp32 && opts.log && comm.rank() == 0)
    std::fprintf(opts.log, "backend cpu: %s GEMM operands emulated (rounded, fp32 products): for checking numerics, "
                 "not speed\n", gemm_math_name(cfg.gemm_math()));
  run.model = std::make_unique<BertModel<float>>(run.mc, *run.ops, cfg.model_limits());
  // What decides the numerics and the speed, once, where a user looks first.
  if (opts.log && comm.rank() == 0)
    std::fprintf(opts.log,
                 "model: %s, %zu parameters (%d layers, hidden %d); micro-batch %d x %d%s, %d per update; %s "
                 "GEMMs, attention %s, activations %s, hidden_act %s, recompute %s\n",
                 cfg.model.preset.c_str(), run.model->table().parameter_count(), run.mc.layers, run.mc.hidden,
                 cfg.batch.micro_batch, cfg.data.seq_len, cfg.data.packing ? " packed" : "", run.accum,
                 gemm_math_name(cfg.gemm_math()),
                 attention_mode_name(cfg.attention_mode()), cfg.precision.activations.c_str(),
                 hidden_act_name(run.mc.hidden_act), recompute_name(cfg.batch.recompute));
  LB_RETURN_IF_ERROR(open_device_communicator(run.device.get(), comm, *run.ops, &run.device_comm));
  if (run.device)
    LB_RETURN_IF_ERROR(make_device_updater(*run.device, cfg.updater_config(), &run.updater));
  else
    LB_RETURN_IF_ERROR(Updater::create(cfg.updater_config(), &run.updater));
  Allocator& alloc = run.ops->allocator();
  run.dp = std::make_unique<DataParallel>(cfg.distributed, run.model->table(), run.model->grads(), comm,
                                          run.device_comm ? *run.device_comm : comm, *run.updater, alloc);
  if (comm.world() > 1 && opts.log && comm.rank() == 0)
    std::fprintf(opts.log, "data parallel: %d ranks (%s), %s, gradients reduced in %s\n", comm.world(),
                 (run.device_comm ? *run.device_comm : comm).kind(),
                 run.dp->sharded() ? "sharded optimizer state" : "replicated optimizer state",
                 cfg.distributed.grad_reduce_dtype.c_str());
  // 16-bit GEMMs read the weights from the copy the optimizer writes in its update pass rather
  // than casting them every micro-step. Not when the update is sharded (it writes its slice
  // only), nor where cuBLAS converts the operands inside the GEMM.
  if (cfg.converts_gemm_operands() && !run.dp->sharded())
    run.model->enable_weight_copy(gemm_half_format(cfg.gemm_math()));
  run.m = Buffer<float>(run.dp->state_elements(), alloc);
  run.v = Buffer<float>(run.dp->state_elements(), alloc);
  run.m.zero();
  run.v.zero();
  LB_RETURN_IF_ERROR(run.restore());
  LB_RETURN_IF_ERROR(check_same_as_rank0(
      comm, {{"step", run.step}, {"micro_step", run.micro}, {"data_epoch", run.pos.epoch}, {"data_consumed", run.pos.consumed},
             {"checkpoint_files", run.resumed_files}},
      "position in the run", "every rank must resume the same checkpoint: put checkpoint.dir on a file system every "
                             "host shares, or pass the same --resume directory"));
  // A stop before where the run starts would be said as a stop there (the ranks agree on the step).
  if (opts.stop_at_step >= 0 && opts.stop_at_step < run.step)
    return Status::invalid_argument("--stop-at-step " + std::to_string(opts.stop_at_step) + ": the run resumes at step " +
                                    std::to_string(run.step) + ", past it");
  LB_RETURN_IF_ERROR(run.check_outputs());
  LoaderOptions lo;
  lo.world = comm.world();
  lo.rank = comm.rank();
  lo.micro_batch = cfg.batch.micro_batch;
  lo.global_batch = cfg.batch.global_batch;
  lo.seed = cfg.seed;
  lo.start = run.pos;
  lo.whole_word = cfg.data.whole_word;
  lo.pack = cfg.data.packing;
  lo.is_continuation = std::move(is_continuation);
  lo.blend = run.blend;
  // Refused after check_outputs took the lock: its earlier record goes back, as there.
  Status started = Loader::create(run.shards.get(), lo, &run.loader);
  if (started.is_ok()) started = run.loader->sampler().check(run.pos);
  if (!started.is_ok()) {
    run.checkpoint_lock.abandon();
    return started;
  }
  Status st = run.loop();
  run.loader->stop();
  return st;
}

}  // namespace lansbert
