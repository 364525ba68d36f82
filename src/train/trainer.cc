// run_training: the setup (data, model, optimizer, restore) and the step loop. The pieces
// that cross ranks live in DataParallel (data_parallel.h): the bucketed gradient all-reduce
// hooked into backward, or the sharded (ZeRO-1) update, and collective checkpoints.
#include "lansbert/train/trainer.h"

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <nlohmann/json.hpp>

#include "lansbert/backend/cpu_ops.h"
#include "lansbert/core/buffer.h"
#include "lansbert/core/file_io.h"
#include "lansbert/core/stop_signals.h"
#include "lansbert/data/loader.h"
#include "lansbert/data/vocab.h"
#include "lansbert/model/bert_model.h"
#include "lansbert/train/checkpoint.h"
#include "lansbert/train/data_parallel.h"
#include "lansbert/train/device_peaks.h"
#include "lansbert/train/device_ranks.h"
#include "lansbert/train/metrics.h"
#include "device_run.h"

namespace lansbert {
namespace {

double now_s() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

struct Run {
  Run(const TrainConfig& c, Communicator& k, const TrainOptions& o) : cfg(c), comm(k), opts(o) {}
  const TrainConfig& cfg;
  Communicator& comm;
  const TrainOptions& opts;
  BertConfig mc;
  int accum = 1;
  std::unique_ptr<DeviceBackend> device;  // backend: cuda (null: the CPU); see device_run.h
  std::unique_ptr<Ops<float>> ops;
  // Gradient collectives over device buffers (NCCL) when several ranks train on devices;
  // null otherwise (comm carries them). Declared after ops: destroyed before the stream.
  std::unique_ptr<Communicator> device_comm;
  std::unique_ptr<BertModel<float>> model;
  Buffer<float> m, v;
  std::unique_ptr<Updater> updater;
  std::unique_ptr<DataParallel> dp;  // gradient reduction + update over the ranks
  std::unique_ptr<ShardSet> shards;
  std::unique_ptr<ShardSet> eval_shards;  // data.eval, null without
  std::unique_ptr<Loader> loader;
  int64_t step = 0;
  uint64_t micro = 0;  // micro-batches of micro_batch sequences done by all ranks together
  DataPosition pos;
  TrainResult* result = nullptr;

  FlatBuffers flat() {
    FlatBuffers b{model->params(), model->grads(), m.data(), v.data()};
    b.half_params = model->weight_copy();  // null unless enabled (run_training)
    b.half_format = model->weight_copy_format();
    return b;
  }
  size_t elements() const { return model->table().total_elements(); }
  bool rank0() const { return comm.rank() == 0; }

  Status open_data(std::vector<bool>* is_continuation);
  // Checkpoint I/O through host staging when the buffers live on a device.
  Status load_params(const std::string& dir);
  Status load_optimizer(const std::string& dir, OptimizerState* state);
  Status restore();
  // After restore(): the output paths can be written and no checkpoint would be overwritten
  // (check_checkpoint_root). Collective: every rank learns of rank 0's refusal.
  Status check_outputs();
  Status check_vocab_size(int64_t tokens, const std::string& source) const;
  Status init_from(const std::string& spec);
  Status save(bool final);
  // One pass over data.eval (the first evaluation.max_sequences samples), split over the
  // ranks, reduced, logged by rank 0. Returns its wall time in *seconds.
  Status evaluate(MetricsLog& log, int64_t total, double* seconds);
  Status loop();
};

// The model's vocab_size against the number of tokens of the data's vocabulary: fewer rows
// than tokens cannot hold the ids; more rows only when model.vocab_size asks for them
// (padding, as NVIDIA's 30528 for tensor-core multiples). A preset's 30522 with a vocab of
// your own would train thousands of rows no id reaches and fail at export.
Status Run::check_vocab_size(int64_t tokens, const std::string& source) const {
  const std::string fix = "set model.vocab_size: " + std::to_string(tokens);
  if (tokens > mc.vocab_size)
    return Status::invalid_argument("model.vocab_size: " + std::to_string(mc.vocab_size) + " rows cannot hold the " +
                                    std::to_string(tokens) + " tokens of " + source + "; " + fix);
  // Only for a new run: a run started (before this check) with a preset's size and a
  // smaller vocab resumes with the layout it has.
  const bool fresh = opts.resume.empty() && opts.init_from.empty();
  if (tokens < mc.vocab_size && !cfg.model.vocab_size && fresh)
    return Status::invalid_argument("model.vocab_size: preset " + cfg.model.preset + " has " +
                                    std::to_string(mc.vocab_size) + ", " + source + " has " + std::to_string(tokens) +
                                    " tokens; " + fix + " (or larger, to pad the embedding)");
  return Status::ok();
}

Status Run::open_data(std::vector<bool>* is_continuation) {
  ShardSetOptions so;
  so.training_only = cfg.data.format == "hdf5";
  if (!cfg.data.vocab.empty()) {
    Vocab vocab;
    Status st = Vocab::load(cfg.data.vocab, &vocab);
    if (!st.is_ok()) return Status(st.code() == StatusCode::kNotFound ? Status::not_found("data.vocab: " + st.message())
                                                                      : Status::invalid_argument("data.vocab: " + st.message()));
    so.vocab_hash = vocab.hash();
    is_continuation->resize(vocab.size());
    for (int i = 0; i < vocab.size(); ++i) (*is_continuation)[i] = vocab.token(i).rfind("##", 0) == 0;
  }
  so.token_limit = mc.vocab_size;
  Status st = ShardSet::open(cfg.data.train, so, &shards);
  if (!st.is_ok()) return st.with_prefix("data.train: ");
  // With data.vocab the shards were made with it (ShardSet::open compared the hashes), so
  // its size is theirs; the one check covers both.
  if (!is_continuation->empty())
    LB_RETURN_IF_ERROR(check_vocab_size(int64_t(is_continuation->size()), "data.vocab " + cfg.data.vocab));
  else if (shards->info())
    LB_RETURN_IF_ERROR(check_vocab_size(shards->info()->vocab_size, "the vocab the data.train shards were made with"));
  auto mismatch = [&](const char* key, long long want, long long got) {
    return Status::invalid_argument(std::string(key) + ": config says " + std::to_string(want) +
                                    ", the shards hold " + std::to_string(got));
  };
  if (shards->seq_len() != cfg.data.seq_len) return mismatch("data.seq_len", cfg.data.seq_len, shards->seq_len());
  if (shards->max_pred() != cfg.data.max_pred) return mismatch("data.max_pred", cfg.data.max_pred, shards->max_pred());
  if (cfg.data.masking != "auto" && (cfg.data.masking == "dynamic") != shards->dynamic_masking())
    return Status::invalid_argument("data.masking: config says " + cfg.data.masking + ", the shards are " +
                                    (shards->dynamic_masking() ? "unmasked (dynamic)" : "masked (static)"));
  // data.whole_word forces whole-word masking where masks are drawn at load time; shards
  // masked at prep time must have been masked that way already.
  if (cfg.data.whole_word && !shards->info())
    return Status::invalid_argument("data.whole_word: HDF5 shards are masked already and record no masking mode; "
                                    "drop data.whole_word");
  if (cfg.data.whole_word && !shards->dynamic_masking() && !shards->info()->whole_word)
    return Status::invalid_argument(
        "data.whole_word: the data.train shards were masked by prep without --whole-word; prep them with "
        "--whole-word (or --dynamic-masking, to mask at load time), or drop data.whole_word");
  if (shards->count() < cfg.batch.global_batch)
    return Status::invalid_argument("batch.global_batch: " + std::to_string(cfg.batch.global_batch) +
                                    " exceeds the " + std::to_string(shards->count()) + " samples of data.train");
  if (cfg.data.eval.empty()) return Status::ok();
  st = ShardSet::open(cfg.data.eval, so, &eval_shards);
  if (!st.is_ok()) return st.with_prefix("data.eval: ");
  if (eval_shards->seq_len() != cfg.data.seq_len)
    return mismatch("data.eval: data.seq_len", cfg.data.seq_len, eval_shards->seq_len());
  if (eval_shards->max_pred() != cfg.data.max_pred)
    return mismatch("data.eval: data.max_pred", cfg.data.max_pred, eval_shards->max_pred());
  if (eval_shards->dynamic_masking())
    return Status::invalid_argument("data.eval: the shards are stored unmasked; evaluation needs statically masked "
                                    "shards (lansbert prep without dynamic masking), so every run scores the same "
                                    "positions");
  // Every sample the evaluations will read, checked now (checksum and field ranges: a few
  // milliseconds) rather than found damaged after hours of training.
  int64_t n = eval_shards->count();
  if (cfg.evaluation.max_sequences > 0) n = std::min(n, cfg.evaluation.max_sequences);
  Batch one;
  one.resize(1, eval_shards->seq_len(), eval_shards->max_pred());
  for (int64_t i = 0; i < n; ++i) LB_RETURN_IF_ERROR(eval_shards->read(i, &one, 0).with_prefix("data.eval: "));
  return Status::ok();
}

Status Run::load_params(const std::string& dir) {
  return load_params_to(device.get(), dir, model->table(), model->params());
}

Status Run::load_optimizer(const std::string& dir, OptimizerState* state) {
  if (!device) return dp->load_optimizer(dir, state, m.data(), v.data());
  std::vector<float> hm(dp->state_elements()), hv(dp->state_elements());
  LB_RETURN_IF_ERROR(dp->load_optimizer(dir, state, hm.data(), hv.data()));
  device->allocator().copy_from_host(m.data(), hm.data(), hm.size() * sizeof(float));
  device->allocator().copy_from_host(v.data(), hv.data(), hv.size() * sizeof(float));
  return Status::ok();
}

namespace {
// JSON equality where fractional numbers are compared as the floats they configure: older
// checkpoints wrote a float's binary expansion (0.10000000149011612), newer ones its decimal
// form (0.1), and the two are one model.
bool same_values(const nlohmann::json& a, const nlohmann::json& b) {
  if (a.is_number_float() || b.is_number_float())
    return a.is_number() && b.is_number() && float(a.get<double>()) == float(b.get<double>());
  if (a.is_object() && b.is_object()) {
    if (a.size() != b.size()) return false;
    for (auto it = a.begin(); it != a.end(); ++it)
      if (!b.contains(it.key()) || !same_values(it.value(), b.at(it.key()))) return false;
    return true;
  }
  if (a.is_array() && b.is_array()) {
    if (a.size() != b.size()) return false;
    for (size_t i = 0; i < a.size(); ++i)
      if (!same_values(a[i], b[i])) return false;
    return true;
  }
  return a == b;
}

// Checkpoints written before model.hidden_act existed were all trained with the erf GELU: their
// stored config (trainer.json's "config") gets that key.
void fill_pre_hidden_act(nlohmann::json* config) {
  nlohmann::json& model = (*config)["model"];
  if (model.is_object() && !model.contains("hidden_act")) model["hidden_act"] = "gelu";
}
}  // namespace

Status Run::restore() {
  std::string dir;
  if (!opts.resume.empty()) {
    LB_RETURN_IF_ERROR(resolve_checkpoint(opts.resume == "latest" ? cfg.checkpoint.dir : opts.resume, &dir));
  } else if (!opts.init_from.empty()) {
    return init_from(opts.init_from);
  } else {
    model->init_params(cfg.seed);
    return Status::ok();
  }
  CheckpointMeta meta;
  LB_RETURN_IF_ERROR(read_checkpoint_meta(dir, &meta));
  auto saved = nlohmann::json::parse(meta.config_json);
  auto mine = nlohmann::json::parse(config_to_json(cfg));
  // batch.recompute changes memory and time, not results (and older checkpoints lack it).
  for (auto* j : {&saved, &mine}) (*j)["batch"].erase("recompute");
  fill_pre_hidden_act(&saved);
  for (const char* key : {"model", "batch"})
    if (!same_values(saved[key], mine[key]))
      return Status::invalid_argument(dir + ": incompatible checkpoint: its " + key + " section " +
                                      saved[key].dump() + " differs from the config's " + mine[key].dump());
  if (meta.step > cfg.schedule.total_steps)
    return Status::invalid_argument(dir + ": the checkpoint is at step " + std::to_string(meta.step) +
                                    ", beyond schedule.total_steps " + std::to_string(cfg.schedule.total_steps) +
                                    " (raise schedule.total_steps to train on)");
  LB_RETURN_IF_ERROR(check_param_layout(dir, meta, model->table()));
  LB_RETURN_IF_ERROR(load_params(dir));
  OptimizerState state;
  LB_RETURN_IF_ERROR(load_optimizer(dir, &state));
  LB_RETURN_IF_ERROR(updater->set_state(state));
  step = meta.step;
  micro = meta.micro_step;
  pos = meta.data;
  if (opts.log && rank0())
    std::fprintf(opts.log, "resuming from %s at step %lld\n", dir.c_str(), (long long)step);
  return Status::ok();
}

Status Run::check_outputs() {
  // Rank 0 writes both (and its creation probes must not race another rank's).
  Status st;
  if (rank0()) st = check_checkpoint_root(cfg.checkpoint.dir, opts.resume.empty() ? -1 : step);
  if (st.is_ok() && rank0() && !cfg.metrics_path().empty())
    st = check_can_create(cfg.metrics_path(), PathKind::kFile, "logging.metrics_file");
  return agree_across_ranks(comm, st, "checking checkpoint.dir and logging.metrics_file", &Status::invalid_argument);
}

namespace {
// A phase that starts from another run's weights must compute the GELU they were trained with:
// `saved` is that run's name for it (lansbert's, or Hugging Face's config.json "hidden_act").
Status check_same_gelu(const std::string& where, const std::string& saved, kern::GeluForm mine) {
  // Hugging Face's other names of the same two functions (transformers' activations.py:
  // gelu_pytorch_tanh and gelu_fast compute the tanh form, gelu_python the erf form).
  kern::GeluForm theirs;
  if (saved == "gelu_pytorch_tanh" || saved == "gelu_fast") {
    theirs = kern::GeluForm::kTanh;
  } else if (saved == "gelu_python") {
    theirs = kern::GeluForm::kErf;
  } else if (!parse_hidden_act(saved, &theirs).is_ok()) {
    return Status::invalid_argument(where + ": the weights were trained with the activation '" + saved +
                                    "', which lansbert does not compute (model.hidden_act: gelu or gelu_tanh)");
  }
  if (theirs == mine) return Status::ok();
  return Status::invalid_argument(where + ": the weights were trained with hidden_act '" + saved +
                                  "' but the config sets model.hidden_act: " + hidden_act_name(mine));
}
}  // namespace

Status Run::init_from(const std::string& spec) {
  std::string dir;
  if (resolve_checkpoint(spec, &dir).is_ok()) {
    CheckpointMeta meta;
    LB_RETURN_IF_ERROR(read_checkpoint_meta(dir, &meta));
    auto saved = nlohmann::json::parse(meta.config_json);
    fill_pre_hidden_act(&saved);
    LB_RETURN_IF_ERROR(check_same_gelu("--init-from " + dir, saved["model"].value("hidden_act", std::string()),
                                       mc.hidden_act));
    LB_RETURN_IF_ERROR(load_params(dir));
    micro = meta.micro_step;  // dropout masks continue, never repeat phase 1's
    if (cfg.phase_start == PhaseStart::kKeepMoments) {
      LB_RETURN_IF_ERROR(check_param_layout(dir, meta, model->table()));
      OptimizerState state;
      LB_RETURN_IF_ERROR(load_optimizer(dir, &state));
      LB_RETURN_IF_ERROR(updater->set_state(state));
    }
    LB_RETURN_IF_ERROR(updater->begin_phase(cfg.schedule, flat(), dp->state_elements()));
  } else {
    // A Hugging Face directory: weights only, a fresh optimizer; its config.json (where there
    // is one) names the activation.
    const std::filesystem::path hf_config = std::filesystem::path(spec) / "config.json";
    std::string text;
    if (std::filesystem::exists(hf_config) && read_file(hf_config.string(), &text).is_ok()) {
      const auto j = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
      if (j.is_object() && j.contains("hidden_act") && j["hidden_act"].is_string())
        LB_RETURN_IF_ERROR(check_same_gelu("--init-from " + hf_config.string(), j["hidden_act"].get<std::string>(),
                                           mc.hidden_act));
    }
    Status st = load_params(spec);
    if (!st.is_ok()) return Status(st.code() == StatusCode::kNotFound
                                       ? Status::not_found("--init-from " + spec + ": neither a lansbert checkpoint nor a directory with model.safetensors")
                                       : st);
    if (opts.log && rank0() && cfg.phase_start == PhaseStart::kKeepMoments)
      std::fprintf(opts.log, "note: %s holds weights only: the optimizer starts fresh (phase.phase_start "
                             "keep_moments needs a lansbert checkpoint)\n", spec.c_str());
  }
  if (opts.log && rank0()) std::fprintf(opts.log, "initialised from %s\n", spec.c_str());
  return Status::ok();
}

Status Run::save(bool final) {
  const double t0 = now_s();
  CheckpointMeta meta;
  meta.step = step;
  meta.micro_step = micro;
  meta.data = pos;
  meta.seed = cfg.seed;
  meta.world = comm.world();
  meta.config_json = config_to_json(cfg);
  meta.optimizer = updater->state();
  HostCopies h(device.get(), model->params(), elements(), m.data(), v.data(), dp->state_elements());
  Status st = dp->save(cfg.checkpoint.dir, meta, h.params, h.m, h.v, cfg.checkpoint.keep_last, final,
                       &result->checkpoint);
  result->t_checkpoint += now_s() - t0;
  return st;
}

Status Run::evaluate(MetricsLog& log, int64_t total, double* seconds) {
  const double t0 = now_s();
  int64_t n = eval_shards->count();
  if (cfg.evaluation.max_sequences > 0) n = std::min(n, cfg.evaluation.max_sequences);
  EvalSums sums;
  Status st = evaluate_samples(*model, *eval_shards, n, cfg.batch.micro_batch, comm.rank(), comm.world(), &sums);
  LB_RETURN_IF_ERROR(agree_across_ranks(comm, st, "evaluation on data.eval"));
  comm.all_reduce(sums.v, EvalSums::kCount, ReduceOp::kSum);
  result->eval = sums.result();
  ++result->evaluations;
  *seconds = now_s() - t0;
  return log.write_eval(step, total, result->eval, *seconds);
}

Status Run::loop() {
  const int64_t total = cfg.schedule.total_steps;
  const int64_t stop_at = opts.stop_at_step >= 0 ? std::min(opts.stop_at_step, total) : total;
  const double flops_seq = training_flops_per_sequence(mc, cfg.data.seq_len, cfg.data.max_pred);
  // MFU against the devices' dense peak for this run's GEMMs, where the device is in the table
  // (every rank is taken to hold the same model as rank 0).
  const DevicePeak* peak = device ? find_device_peak(device->description()) : nullptr;
  const double peak_tflops = peak ? peak_tflops_for(*peak, cfg.gemm_math()) * comm.world() : 0;
  MetricsLog log(rank0() ? opts.log : nullptr, rank0() ? cfg.metrics_path() : "");
  MetricsWindow win;
  Batch batch;
  MicroBatchInfo info;
  StepReport report;
  double t_window = now_s(), t_last_ckpt = now_s();
  const double t_start = now_s();
  double w_data = 0, w_compute = 0, w_allreduce = 0, w_opt = 0;
  bool first_window = true;
  while (step < stop_at) {
    model->zero_grads();
    for (int k = 0; k < accum; ++k) {
      double t0 = now_s();
      LB_RETURN_IF_ERROR(loader->next(&batch, &info));
      const double t1 = now_s();
      // Dropout keys by the micro-batch's index in the global batch (rank r holds indices
      // r*accum ...), so the masks of a sample do not depend on the rank count.
      const uint64_t key = micro + uint64_t(comm.rank()) * accum + k;
      const ForwardResult r = model->forward(batch, StepContext{true, cfg.seed, uint32_t(key)});
      dp->begin_micro_step(k == accum - 1);
      // The loss is scaled by the scaler's current scale (1 unless loss scaling is on), so
      // small fp16 gradients survive the GEMMs; the Updater divides it out before the update.
      model->backward(float(updater->loss_scale()) / float(accum), dp->backward_hook());
      // Charge the queued kernels to compute, not the optimizer; a device communicator's
      // reductions are waited for in dp->step (the all-reduce share).
      if (device) device->synchronize_compute(*ops);
      w_data += t1 - t0;
      w_compute += now_s() - t1;
      win.add(r, batch.batch);
      if (info.last) pos = info.next;
    }
    micro += uint64_t(accum) * comm.world();
    double t0 = now_s(), t_reduce = 0;
    LB_RETURN_IF_ERROR(dp->step(flat(), &report, &t_reduce));
    if (!report.skipped) model->set_weight_copy_current(true);  // the update wrote it (if enabled)
    w_allreduce += t_reduce;
    w_opt += now_s() - t0 - t_reduce;
    ++step;
    if (opts.after_step) opts.after_step(step);

    // Decisions every rank must agree on: stop (a signal) and a timed checkpoint.
    double flags[2] = {double(stop_signal() != 0),
                       double(cfg.checkpoint.every_minutes > 0 &&
                              now_s() - t_last_ckpt >= 60 * cfg.checkpoint.every_minutes)};
    comm.all_reduce(flags, 2, ReduceOp::kMax);

    if (step % cfg.logging.every_steps == 0 || step == stop_at || flags[0] != 0) {
      const double tl = now_s();
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
      rec.loss_scale = report.loss_scale;
      rec.skipped = updater->state().skipped_steps;
      rec.seq_per_s = seqs / dt;
      rec.tokens_per_s = seqs * cfg.data.seq_len / dt;
      rec.tflops = seqs * flops_seq / dt / 1e12;
      rec.mfu = peak_tflops > 0 ? rec.tflops / peak_tflops : 0;
      rec.elapsed_s = tl - t_start;
      rec.eta_s = double(stop_at - step) * cfg.batch.global_batch / std::max(rec.seq_per_s, 1e-9);
      rec.t_data = w_data / dt;
      rec.t_compute = w_compute / dt;
      rec.t_allreduce = w_allreduce / dt;
      rec.t_optimizer = w_opt / dt;
      rec.t_other = std::max(0.0, 1 - rec.t_data - rec.t_compute - rec.t_allreduce - rec.t_optimizer);
      LB_RETURN_IF_ERROR(log.write(rec));
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
      w_data = w_compute = w_allreduce = w_opt = 0;
      result->t_logging += now_s() - tl;
      t_window = now_s();
    }
    // The checkpoint first, so that an evaluation that fails (a corrupt data.eval record)
    // loses no training.
    const bool periodic = cfg.checkpoint.every_steps > 0 && step % cfg.checkpoint.every_steps == 0;
    if (periodic || flags[1] != 0 || flags[0] != 0 || step == stop_at) {
      LB_RETURN_IF_ERROR(save(step == total));
      t_last_ckpt = now_s();
    }
    // Held-out evaluation: every evaluation.every_steps and when the run reaches its last
    // step (not when a signal or --stop-at-step ends it early: a resumed run then evaluates
    // where an uninterrupted one would have). Its time is kept out of the next window's
    // throughput.
    const bool eval_due = cfg.evaluation.every_steps > 0 && step % cfg.evaluation.every_steps == 0;
    if (eval_shards && (eval_due || step == total) && flags[0] == 0) {
      double seconds = 0;
      LB_RETURN_IF_ERROR(evaluate(log, total, &seconds));
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
  const double have = double(::sysconf(_SC_PHYS_PAGES)) * double(::sysconf(_SC_PAGE_SIZE));
  return check_plan_fits(cfg, plan, have, std::max(comm.local_world(), 1), "this host's memory");
}

}  // namespace

Status run_training(const TrainConfig& cfg, Communicator& comm, const TrainOptions& opts,
                    TrainResult* result) {
  Run run(cfg, comm, opts);
  run.result = result;
  *result = TrainResult{};
  LB_RETURN_IF_ERROR(cfg.resolve_model(&run.mc));
  run.accum = int(cfg.batch.global_batch / (int64_t(cfg.batch.micro_batch) * comm.world()));
  std::vector<bool> is_continuation;
  LB_RETURN_IF_ERROR(run.open_data(&is_continuation));
  if (cfg.backend == "cpu") LB_RETURN_IF_ERROR(check_host_memory(cfg, comm));
  if (cfg.backend != "cpu") LB_RETURN_IF_ERROR(open_device(cfg, comm, opts, &run.device));
  run.ops = run.device ? run.device->make_ops(DeviceOptions{cfg.gemm_math(), cfg.attention_mode(), cfg.cast_in_gemm()})
                       : cpu::make_ops<float>(cfg.gemm_math(), true, cfg.backend_attention_mode());
  if (!run.device && cfg.gemm_math() != GemmMath::kFp32 && opts.log && comm.rank() == 0)
    std::fprintf(opts.log, "backend cpu: %s GEMM operands emulated (rounded, fp32 products): for checking numerics, "
                 "not speed\n", gemm_math_name(cfg.gemm_math()));
  run.model = std::make_unique<BertModel<float>>(run.mc, *run.ops, cfg.model_limits());
  // What decides the numerics and the speed, once, where a user looks first.
  if (opts.log && comm.rank() == 0)
    std::fprintf(opts.log,
                 "model: %s, %zu parameters (%d layers, hidden %d); micro-batch %d x %d, %d per update; %s "
                 "GEMMs, attention %s, activations %s, hidden_act %s, recompute %s\n",
                 cfg.model.preset.c_str(), run.model->table().total_elements(), run.mc.layers, run.mc.hidden,
                 cfg.batch.micro_batch, cfg.data.seq_len, run.accum, gemm_math_name(cfg.gemm_math()),
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
  LB_RETURN_IF_ERROR(run.check_outputs());
  LoaderOptions lo;
  lo.world = comm.world();
  lo.rank = comm.rank();
  lo.micro_batch = cfg.batch.micro_batch;
  lo.global_batch = cfg.batch.global_batch;
  lo.seed = cfg.seed;
  lo.start = run.pos;
  lo.whole_word = cfg.data.whole_word;
  lo.is_continuation = std::move(is_continuation);
  LB_RETURN_IF_ERROR(Loader::create(run.shards.get(), lo, &run.loader));
  LB_RETURN_IF_ERROR(run.loader->sampler().check(run.pos));
  StopSignals guard(opts.handle_signals);
  Status st = run.loop();
  run.loader->stop();
  return st;
}

}  // namespace lansbert
