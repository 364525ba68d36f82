// TrainConfig's cross-field rules, the resolved model sizes, the run plan and the FLOP
// formula. Each error names the key path at fault so the YAML loader can point at its line.
#include "lansbert/train/train_config.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <string>
#include <tuple>
#include <nlohmann/json.hpp>

#include "lansbert/core/float_text.h"
#include "lansbert/data/blend.h"
#include "lansbert/dist/communicator.h"
#include "lansbert/model/bert_model.h"
#include "lansbert/model/flops.h"
#include "lansbert/train/checkpoint.h"
#include "lansbert/train/evaluate.h"

namespace lansbert {

Status TrainConfig::resolve_model(BertConfig* out) const {
  BertConfig c;
  Status st = bert_preset(model.preset, &c);
  if (!st.is_ok()) return Status::invalid_argument("unknown preset '" + model.preset + "'");
  if (model.vocab_size) c.vocab_size = *model.vocab_size;
  if (model.hidden) c.hidden = *model.hidden;
  if (model.layers) c.layers = *model.layers;
  if (model.heads) c.heads = *model.heads;
  if (model.intermediate) c.intermediate = *model.intermediate;
  if (model.max_positions) c.max_positions = *model.max_positions;
  if (model.hidden_dropout) c.hidden_dropout = *model.hidden_dropout;
  if (model.attention_dropout) c.attention_dropout = *model.attention_dropout;
  if (model.init_std) c.init_std = *model.init_std;
  if (model.hidden_act) c.hidden_act = *model.hidden_act;
  *out = c;
  return Status::ok();
}

namespace {
Status bad(std::string* key, const char* k, const std::string& msg) {
  *key = k;
  return Status::invalid_argument(std::string(k) + ": " + msg);
}
// "model.hidden must be ..." -> "model.hidden"
std::string leading_key(const std::string& msg) {
  size_t n = 0;
  while (n < msg.size() && msg[n] != ' ' && msg[n] != ':' && msg[n] != ',') ++n;
  return msg.substr(0, n);
}
Status prefixed(std::string* key, const std::string& section, Status st) {
  if (st.is_ok()) return st;
  const std::string said = leading_key(st.message());
  std::string k = said.find('.') == std::string::npos ? section + "." + said : said;
  // The optim layer names its own structs' fields; map them to this schema's keys, and say
  // the key the user wrote in the message too.
  const std::string own = k;
  if (k.rfind("loss_scale.", 0) == 0) k = "precision." + k.substr(11);
  if (k == "schedule.peak_lr") k = "optimizer.lr";
  if (k == "schedule.decay_power") k = "schedule.power";
  const bool renamed = k != own;
  // "schedule.warmup_steps/constant_steps ...": located at warmup_steps, the message kept.
  if (k.rfind("schedule.warmup_steps", 0) == 0) k = "schedule.warmup_steps";
  *key = k;
  if (renamed) return Status::invalid_argument(k + st.message().substr(said.size()));
  return st;
}
}  // namespace

Status TrainConfig::validate(int world, std::string* key) const {
  BertConfig mc;
  if (!resolve_model(&mc).is_ok())
    return bad(key, "model.preset", "unknown preset '" + model.preset + "'");
  LB_RETURN_IF_ERROR(prefixed(key, "model", mc.validate()));
  if (data.train.empty()) return bad(key, "data.train", "at least one shard glob is required");
  // An empty pattern matches nothing and names nothing (`--set data.eval=` gives one).
  for (const auto& [name, list, clear] : {std::tuple{"data.train", &data.train, ""},
                                          {"data.eval", &data.eval, " (no held-out set: data.eval=[])"}})
    for (const std::string& pattern : *list)
      if (pattern.empty()) return bad(key, name, std::string("an empty pattern") + clear);
  if (!data.weights.empty()) {
    if (data.weights.size() != data.train.size())
      return bad(key, "data.weights", std::to_string(data.weights.size()) + " weight" +
                                          (data.weights.size() == 1 ? "" : "s") + " for the " +
                                          std::to_string(data.train.size()) + " entries of data.train (one each)");
    std::vector<uint32_t> shares;
    const Status st = BlendSchedule::shares(data.weights, "data.weights", &shares);
    if (!st.is_ok()) {
      *key = "data.weights";
      return st;
    }
  }
  if (data.format != "auto" && data.format != "lbs" && data.format != "hdf5")
    return bad(key, "data.format", "expected auto, lbs or hdf5, got '" + data.format + "'");
  if (data.masking != "auto" && data.masking != "static" && data.masking != "dynamic")
    return bad(key, "data.masking", "expected auto, static or dynamic, got '" + data.masking + "'");
  if (data.seq_len <= 0) return bad(key, "data.seq_len", "must be positive");
  if (data.seq_len > mc.max_positions)
    return bad(key, "data.seq_len", std::to_string(data.seq_len) + " exceeds model.max_positions " +
                                        std::to_string(mc.max_positions));
  if (data.max_pred <= 0 || data.max_pred > data.seq_len)
    return bad(key, "data.max_pred", "must be in [1, data.seq_len]");
  if (data.whole_word && data.vocab.empty())
    return bad(key, "data.whole_word", "whole-word masking needs data.vocab");
  if (batch.micro_batch <= 0) return bad(key, "batch.micro_batch", "must be positive");
  if (batch.global_batch <= 0) return bad(key, "batch.global_batch", "must be positive");
  const int64_t per_update = int64_t(batch.micro_batch) * world;
  if (batch.global_batch % per_update != 0)
    return bad(key, "batch.global_batch",
               std::to_string(batch.global_batch) + " is not a multiple of batch.micro_batch * world = " +
                   std::to_string(batch.micro_batch) + " * " + std::to_string(world) +
                   " (accumulation must be a whole number of micro-batches)");
  const std::vector<std::string> names = optimizer_names();
  if (std::find(names.begin(), names.end(), optimizer.name) == names.end())
    return bad(key, "optimizer.name", "unknown optimizer '" + optimizer.name + "' (expected lans, lamb or adamw)");
  LB_RETURN_IF_ERROR(prefixed(key, "optimizer", optimizer.validate()));
  // The run's length, whatever the schedule's shape (a constant schedule ignores it; the
  // trainer does not: without it a run would end at step 0 and call that final).
  if (schedule.total_steps <= 0)
    return bad(key, "schedule.total_steps", "must be positive: it is the number of steps to train, for every kind");
  LB_RETURN_IF_ERROR(prefixed(key, "schedule", schedule.validate()));
  if (precision.dtype != "fp32" && precision.dtype != "bf16" && precision.dtype != "fp16")
    return bad(key, "precision.dtype", "expected fp32, bf16 or fp16, got '" + precision.dtype + "'");
  if (backend != "cpu" && backend != "cuda")
    return bad(key, "backend", "expected cpu or cuda, got '" + backend + "'");
  if (backend == "cpu" && precision.tf32)
    return bad(key, "precision.tf32", "TF32 is a CUDA option; the CPU backend computes in fp32");
  if (precision.tf32 && precision.dtype != "fp32")
    return bad(key, "precision.tf32", "applies to dtype fp32 only (dtype is '" + precision.dtype + "')");
  AttentionMode attention;
  if (!parse_attention_mode(precision.attention, &attention))
    return bad(key, "precision.attention", "expected native, cudnn, auto or flash, got '" + precision.attention + "'");
  if (backend == "cpu" && attention == AttentionMode::kCudnn)
    return bad(key, "precision.attention",
               "cudnn is a CUDA option; the CPU backend has the hand-written and the flash attention only");
  if (precision.gemm_cast != "kernel" && precision.gemm_cast != "cublas")
    return bad(key, "precision.gemm_cast", "expected kernel or cublas, got '" + precision.gemm_cast + "'");
  if (precision.gemm_cast == "cublas" && backend != "cuda")
    return bad(key, "precision.gemm_cast", "cublas is a CUDA option; the CPU backend rounds operands itself");
  if (precision.gemm_cast == "cublas" && precision.dtype == "fp32")
    return bad(key, "precision.gemm_cast", "cublas applies to dtype bf16 or fp16 (dtype is fp32)");
  if (precision.activations != "fp32" && precision.activations != "16bit")
    return bad(key, "precision.activations", "expected fp32 or 16bit, got '" + precision.activations + "'");
  if (precision.activations == "16bit" && precision.dtype == "fp32")
    return bad(key, "precision.activations", "16bit stores them in the GEMMs' format: needs dtype bf16 or fp16 (dtype is fp32)");
  if (precision.activations == "16bit" && precision.gemm_cast == "cublas")
    return bad(key, "precision.activations", "16bit needs gemm_cast kernel (with cublas the GEMMs read fp32 operands)");
  LossScaleMode mode;
  if (precision.loss_scale != "auto" && !parse_loss_scale_mode(precision.loss_scale, &mode).is_ok())
    return bad(key, "precision.loss_scale",
               "expected auto, none, static or dynamic, got '" + precision.loss_scale + "'");
  LB_RETURN_IF_ERROR(prefixed(key, "precision", updater_config().loss_scale.validate()));
  if (checkpoint.dir.empty()) return bad(key, "checkpoint.dir", "must not be empty");
  if (checkpoint.every_steps < 0) return bad(key, "checkpoint.every_steps", "must be >= 0");
  if (!(checkpoint.every_minutes >= 0)) return bad(key, "checkpoint.every_minutes", "must be >= 0");
  if (checkpoint.keep_last < 1) return bad(key, "checkpoint.keep_last", "must be >= 1");
  if (checkpoint.async && distributed.shard_optimizer)
    return bad(key, "checkpoint.async",
               "needs replicated optimizer state (distributed.shard_optimizer: false): a sharded checkpoint is "
               "written by every rank together, each its own slice");
  if (logging.every_steps <= 0) return bad(key, "logging.every_steps", "must be positive");
  if (logging.noise_scale_updates < 1)
    return bad(key, "logging.noise_scale_updates", "must be >= 1 (updates the moving averages span)");
  if (logging.noise_scale && batch.global_batch <= int64_t(batch.micro_batch) * world)
    return bad(key, "logging.noise_scale",
               "compares a micro-batch's gradient with the whole update's, so it needs 2 or more micro-batches per "
               "update on each rank: batch.global_batch " + std::to_string(batch.global_batch) + " is one micro-batch "
               "of " + std::to_string(batch.micro_batch) + " on each of " + std::to_string(world) +
               " rank(s); lower batch.micro_batch");
  if (evaluation.every_steps < 0) return bad(key, "evaluation.every_steps", "must be >= 0 (0: at the end only)");
  if (evaluation.every_steps > 0 && data.eval.empty())
    return bad(key, "evaluation.every_steps", "needs data.eval (held-out shards to evaluate on)");
  if (evaluation.max_sequences < -1 || evaluation.max_sequences == 0)
    return bad(key, "evaluation.max_sequences", "must be positive, or -1 for all of data.eval");
  if (!evaluation.names.empty()) {
    if (evaluation.names.size() != data.eval.size())
      return bad(key, "evaluation.names",
                 std::to_string(evaluation.names.size()) + " name" + (evaluation.names.size() == 1 ? "" : "s") +
                     " for the " + std::to_string(data.eval.size()) + " entries of data.eval (one each)");
    if (const Status st = check_eval_set_names(evaluation.names, "evaluation.names"); !st.is_ok()) {
      *key = "evaluation.names";
      return st;
    }
  }
  if (!(distributed.bucket_mb > 0) || distributed.bucket_mb > 4096)
    return bad(key, "distributed.bucket_mb", "must be in (0, 4096] MiB");
  if (distributed.reduction_order != "fast" && distributed.reduction_order != "fixed")
    return bad(key, "distributed.reduction_order",
               "expected fast or fixed, got '" + distributed.reduction_order + "'");
  GradWire wire;
  if (!parse_grad_wire(distributed.grad_reduce_dtype, &wire))
    return bad(key, "distributed.grad_reduce_dtype",
               "expected fp32, bf16 or fp16, got '" + distributed.grad_reduce_dtype + "'");
  // Unscaled gradients below 2^-24 vanish in fp16 and those below 2^-14 lose bits; a loss
  // scale lifts them into range (bf16 has fp32's range and needs none).
  if (wire == kern::HalfFormat::kFp16 && updater_config().loss_scale.mode == LossScaleMode::kNone)
    return bad(key, "distributed.grad_reduce_dtype",
               "fp16 needs a loss scale (precision.dtype: fp16, or precision.loss_scale: static or "
               "dynamic): unscaled gradients underflow fp16; bf16 needs none");
  return Status::ok();
}

GemmMath TrainConfig::gemm_math() const {
  if (precision.dtype == "bf16") return GemmMath::kBf16;
  if (precision.dtype == "fp16") return GemmMath::kFp16;
  return precision.tf32 ? GemmMath::kTf32 : GemmMath::kFp32;
}

UpdaterConfig TrainConfig::updater_config() const {
  UpdaterConfig u;
  u.optimizer = optimizer;
  u.schedule = schedule;
  u.loss_scale = precision.scaler;
  LossScaleMode mode = LossScaleMode::kNone;
  if (precision.loss_scale == "auto")
    mode = precision.dtype == "fp16" ? LossScaleMode::kDynamic : LossScaleMode::kNone;
  else if (!parse_loss_scale_mode(precision.loss_scale, &mode).is_ok())
    mode = LossScaleMode::kNone;
  u.loss_scale.mode = mode;
  u.phase_start = phase_start;
  return u;
}

std::string TrainConfig::metrics_path() const {
  if (logging.metrics_file == "-") return "";
  if (logging.metrics_file.empty()) return checkpoint.dir + "/metrics.jsonl";
  return logging.metrics_file;
}

std::string TrainConfig::tensorboard_path() const {
  if (logging.tensorboard_dir == "-") return "";
  if (logging.tensorboard_dir == "auto") return checkpoint.dir + "/tensorboard";
  return logging.tensorboard_dir;
}

double training_flops_per_sequence(const BertConfig& c, int seq_len, int max_pred) {
  return bert_train_flops(c, 1, seq_len, max_pred);
}

Status make_plan(const TrainConfig& config, int world, TrainPlan* plan) {
  BertConfig mc;
  LB_RETURN_IF_ERROR(config.resolve_model(&mc));
  TrainPlan p;
  p.world = world;
  p.accumulation = int(config.batch.global_batch / (int64_t(config.batch.micro_batch) * world));
  p.steps = config.schedule.total_steps;
  p.sequences = p.steps * config.batch.global_batch;
  p.tokens = p.sequences * config.data.seq_len;
  const ParamTable table = make_bert_param_table(mc);
  p.parameters = table.parameter_count();
  p.checkpoint_bytes = checkpoint_bytes_estimate(table);
  // params and grads whole; m and v whole, or 1/world of them with a sharded optimizer.
  const size_t n = table.total_elements();
  const size_t state = config.distributed.shard_optimizer ? (n + world - 1) / world : n;
  p.flat_bytes = (2 * n + 2 * state) * sizeof(float);
  // The optimizer's 16-bit weight copy (trainer.cc: unsharded runs whose kernels convert the
  // GEMM operands) and the wire buffer of a 16-bit gradient reduction on more than one rank.
  const bool half_wire = config.distributed.grad_reduce_dtype != "fp32";
  if (config.converts_gemm_operands() && !config.distributed.shard_optimizer) p.half_bytes += n * 2;
  if (world > 1 && half_wire) p.half_bytes += n * 2;
  if (world > 1) p.reduce_bytes = n * (half_wire ? 2 : sizeof(float));
  // 16-bit GEMMs with our cast pass (cast reuse is always on in training) keep the GEMM-only
  // activations as 16-bit copies only, and the GEMM inputs as copies too.
  p.activation_bytes = BertModel<float>::activation_bytes_for(
      mc, config.model_limits(),
      OutputStorage::for_plan(config.converts_gemm_operands(), config.backend_attention_mode(),
                              flash_attention_planned(config.backend != "cpu", is_half_gemm(config.gemm_math()),
                                                      mc.head_dim())));
  // The fused attention keeps neither q/k/v nor probabilities, except where it falls back to
  // the hand-written one (no engine for the shape, a failed auto check): not counted then, so
  // the plan stays a lower bound. With attention dropout it stages one bf16 keep mask
  // [B, A, S, S] for all layers (cuda/fused_attention.cu); its other staging is workspace.
  // The flash attention stages nothing: its mask is drawn inside its kernels.
  const bool fused = config.attention_mode() != AttentionMode::kNative;
  const bool cudnn = fused && config.attention_mode() != AttentionMode::kFlash;
  // The flash attention takes q/k/v (and ctx, d(ctx)) as kept copies, like the hand-written
  // one, but keeps no probabilities.
  const bool flash = config.attention_mode() == AttentionMode::kFlash;
  if (config.converts_gemm_operands())
    p.half_bytes += BertModel<float>::kept_copy_bytes_for(mc, config.model_limits(), !fused || flash, !flash);
  if (cudnn && config.backend != "cpu" && mc.attention_dropout > 0)
    p.half_bytes += size_t(config.batch.micro_batch) * mc.heads * config.data.seq_len * config.data.seq_len * 2;
  p.flops_per_sequence = training_flops_per_sequence(mc, config.data.seq_len, config.data.max_pred);
  *plan = p;
  return Status::ok();
}

Status check_plan_fits(const TrainConfig& config, const TrainPlan& p, double have, int ranks,
                       const std::string& where) {
  const double gib = 1073741824.0;
  const double need = double(p.bytes_per_rank());
  if (have <= 0 || need * ranks <= have) return Status::ok();
  char buf[600];
  if (double(p.flat_bytes) * ranks > have) {  // no batch setting helps: the model is too big here
    BertConfig mc;
    (void)config.resolve_model(&mc);
    std::snprintf(buf, sizeof buf,
                  "the model's parameters, gradients and optimizer moments alone need %.1f GiB per rank (%zu "
                  "parameters: model.vocab_size %d, model.hidden %d, model.layers %d, model.intermediate %d) x %d "
                  "rank(s), more than the %.1f GiB of %s; no batch setting shrinks them: choose a smaller model%s",
                  double(p.flat_bytes) / gib, p.parameters, mc.vocab_size, mc.hidden, mc.layers, mc.intermediate,
                  ranks, have / gib, where.c_str(),
                  p.world > 1 && !config.distributed.shard_optimizer ? " or set distributed.shard_optimizer: true" : "");
    return Status::invalid_argument(buf);
  }
  std::snprintf(buf, sizeof buf,
                "the run needs %.1f GiB per rank (flat buffers %.1f, 16-bit copies %.1f, activations %.1f: see "
                "--dry-run) x %d rank(s), more than the %.1f GiB of %s; reduce batch.micro_batch or data.seq_len%s%s",
                need / gib, double(p.flat_bytes) / gib, double(p.half_bytes) / gib, double(p.activation_bytes) / gib,
                ranks, have / gib, where.c_str(),
                config.batch.recompute == Recompute::kLayers    ? ""
                : config.batch.recompute == Recompute::kAttention ? ", set batch.recompute: layers"
                                                                  : ", set batch.recompute: attention or layers",
                p.world > 1 && !config.distributed.shard_optimizer ? ", or set distributed.shard_optimizer: true" : "");
  return Status::invalid_argument(buf);
}

AttentionMode TrainConfig::attention_mode() const {
  AttentionMode m = AttentionMode::kNative;
  (void)parse_attention_mode(precision.attention, &m);
  return m;
}

std::string config_to_json(const TrainConfig& c, int indent) {
  using nlohmann::ordered_json;
  BertConfig mc;
  (void)c.resolve_model(&mc);
  ordered_json j;
  j["model"] = {{"preset", c.model.preset},          {"vocab_size", mc.vocab_size},
                {"hidden", mc.hidden},               {"layers", mc.layers},
                {"heads", mc.heads},                 {"intermediate", mc.intermediate},
                {"max_positions", mc.max_positions}, {"hidden_dropout", decimal_of(mc.hidden_dropout)},
                {"attention_dropout", decimal_of(mc.attention_dropout)}, {"init_std", decimal_of(mc.init_std)},
                {"hidden_act", hidden_act_name(mc.hidden_act)}};
  j["data"] = {{"train", c.data.train},       {"eval", c.data.eval},      {"weights", c.data.weights},
               {"format", c.data.format},     {"seq_len", c.data.seq_len},
               {"max_pred", c.data.max_pred}, {"masking", c.data.masking},
               {"whole_word", c.data.whole_word}, {"vocab", c.data.vocab},
               {"packing", c.data.packing}};
  j["batch"] = {{"global_batch", c.batch.global_batch},
                {"micro_batch", c.batch.micro_batch},
                {"recompute", recompute_name(c.batch.recompute)}};
  const OptimizerConfig& o = c.optimizer;
  std::vector<std::string> roles;
  for (ParamRole r : o.no_decay_roles) roles.push_back(param_role_name(r));
  j["optimizer"] = {{"name", o.name},   {"lr", c.schedule.peak_lr},
                    {"beta1", o.beta1}, {"beta2", o.beta2},
                    {"eps", o.eps},     {"weight_decay", o.weight_decay},
                    {"max_grad_norm", o.max_grad_norm},
                    {"trust_ratio_on_excluded", o.trust_ratio_on_excluded},
                    {"no_decay", roles}};
  const ScheduleConfig& s = c.schedule;
  j["schedule"] = {{"kind", schedule_kind_name(s.kind)}, {"total_steps", s.total_steps},
                   {"warmup_ratio", s.warmup_ratio},      {"constant_ratio", s.constant_ratio},
                   {"warmup_steps", s.warmup_steps},      {"constant_steps", s.constant_steps},
                   {"power", s.decay_power},              {"first_update", first_update_name(s.first_update)}};
  // Only where it means something: the checkpoints of other kinds (and of builds without the
  // key) keep the json they had.
  if (s.kind == ScheduleKind::kCosine || s.min_ratio != 0) j["schedule"]["min_ratio"] = s.min_ratio;
  const LossScalerConfig& l = c.precision.scaler;
  j["precision"] = {{"dtype", c.precision.dtype}, {"loss_scale", c.precision.loss_scale}, {"tf32", c.precision.tf32},
                    {"attention", c.precision.attention}, {"gemm_cast", c.precision.gemm_cast},
                    {"activations", c.precision.activations},
                    {"initial_scale", l.initial_scale}, {"growth_interval", l.growth_interval},
                    {"growth_factor", l.growth_factor}, {"backoff_factor", l.backoff_factor},
                    {"min_scale", l.min_scale},         {"hysteresis", l.hysteresis},
                    {"max_consecutive_skips", l.max_consecutive_skips}};
  j["checkpoint"] = {{"dir", c.checkpoint.dir}, {"every_steps", c.checkpoint.every_steps},
                     {"every_minutes", c.checkpoint.every_minutes}, {"keep_last", c.checkpoint.keep_last},
                     {"async", c.checkpoint.async}};
  j["logging"] = {{"every_steps", c.logging.every_steps},
                  {"metrics_file", c.logging.metrics_file},
                  {"tensorboard_dir", c.logging.tensorboard_dir}};
  if (c.logging.noise_scale) {
    j["logging"]["noise_scale"] = true;
    j["logging"]["noise_scale_updates"] = c.logging.noise_scale_updates;
  }
  j["evaluation"] = {{"every_steps", c.evaluation.every_steps}, {"max_sequences", c.evaluation.max_sequences}};
  if (!c.evaluation.names.empty()) j["evaluation"]["names"] = c.evaluation.names;
  j["distributed"] = {{"bucket_mb", c.distributed.bucket_mb},
                      {"reduction_order", c.distributed.reduction_order},
                      {"shard_optimizer", c.distributed.shard_optimizer},
                      {"overlap_reduction", c.distributed.overlap_reduction},
                      {"grad_reduce_dtype", c.distributed.grad_reduce_dtype}};
  j["phase"] = {{"phase_start", phase_start_name(c.phase_start)}};
  j["seed"] = c.seed;
  j["backend"] = c.backend;
  return j.dump(indent);
}

}  // namespace lansbert
