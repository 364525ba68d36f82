// Run::restore (--resume), Run::init_from (a later phase from a checkpoint or a Hugging Face
// directory) and Run::save: checkpoints against the run's config and model (trainer_run.h).
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "lansbert/core/check.h"
#include "lansbert/data/sampler.h"
#include "lansbert/model/hf_config.h"
#include "lansbert/train/checkpoint.h"
#include "lansbert/train/device_ranks.h"
#include "lansbert/train/rank_agreement.h"
#include "device_run.h"
#include "trainer_run.h"

namespace lansbert::trainer_detail {

Status Run::load_params(const std::string& dir, const CheckpointMeta* meta) {
  return load_params_on_ranks(comm, device.get(), dir, meta, model->table(), model->params());
}

Status Run::load_optimizer(const std::string& dir, const CheckpointMeta& meta, OptimizerState* state) {
  if (!device) return dp->load_optimizer(dir, meta, state, m.data(), v.data());
  std::vector<float> hm(dp->state_elements()), hv(dp->state_elements());
  LB_RETURN_IF_ERROR(dp->load_optimizer(dir, meta, state, hm.data(), hv.data()));
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

// A resume continues the interrupted run's data order only over the same samples: the
// position (epoch, samples consumed) indexes a permutation of data.train's samples. Shards
// added, removed or rewritten with other contents in between are allowed (a corpus may grow
// between phases' restarts) but said, since the run is no longer the uninterrupted one; shards
// moved to another path are the same data. Empty when they are the same, or when the
// checkpoint predates the record.
std::string train_data_note(const std::string& saved_json, const nlohmann::json& now) {
  if (saved_json.empty()) return "";
  const nlohmann::json saved = nlohmann::json::parse(saved_json);
  bool same = true;  // (a vocab_hash recorded on one side only is not the data changing)
  for (const char* key : {"samples", "files", "digest"})
    same = same && saved.value(key, nlohmann::json()) == now.value(key, nlohmann::json());
  if (same) return "";
  auto describe = [](const nlohmann::json& d) {
    char digest[16];
    std::snprintf(digest, sizeof digest, "%08x", d.value("digest", 0u));
    const int files = d.value("files", 0);
    return std::to_string(d.value("samples", int64_t(0))) + " samples in " + std::to_string(files) +
           (files == 1 ? " file" : " files") + ", sample digest " + digest;
  };
  return "data.train is not the data the checkpoint's run read (it read " + describe(saved) + "; now " +
         describe(now) + "): the run goes on from the same position in the new data's order, so from here it reads "
         "other samples than the interrupted run would have";
}

// The first key of section `key` whose value differs between the checkpoint's config and the
// run's, as "key.field is A in the checkpoint, B in the config" (a key only one side has counts
// as null there), or "" when they agree.
std::string first_difference(const char* key, const nlohmann::json& saved, const nlohmann::json& mine) {
  nlohmann::json keys = nlohmann::json::object();
  for (const auto* side : {&saved, &mine})
    for (auto it = side->begin(); it != side->end(); ++it) keys[it.key()] = true;
  for (auto it = keys.begin(); it != keys.end(); ++it) {
    const nlohmann::json a = saved.value(it.key(), nlohmann::json()), b = mine.value(it.key(), nlohmann::json());
    if (!same_values(a, b))
      return std::string(key) + "." + it.key() + " is " + a.dump() + " in the checkpoint, " + b.dump() + " in the config";
  }
  return "";
}

// A blend ties each weight, and each source's order of samples, to its entry's place in
// data.train: a source the checkpoint's run read as entry i and the config lists as entry j
// would go on with entry i's weight and order exchanged for another's. Only entries whose
// samples changed (by their digests, train_data.source_digests: every blend's checkpoint has
// them) count: shards moved or renamed with each entry keeping its samples are the same run,
// and of two identical sources one may be replaced. Among changed entries, entry i's samples
// now at entry j is a move; so is entry i's glob at entry j where both entries' samples are
// new (the sources rewritten, then listed in another order).
Status check_blend_order(const std::string& dir, const nlohmann::json& saved_config, const nlohmann::json& config,
                         const std::string& saved_train_data, const nlohmann::json& train_data) {
  using nlohmann::json;
  const json saved_train = saved_config["data"].value("train", json::array()), train = config["data"]["train"];
  const json saved_digests =
      saved_train_data.empty() ? json() : json::parse(saved_train_data).value("source_digests", json());
  const json digests = train_data.value("source_digests", json());
  const size_t n = train.size();
  if (saved_digests.is_array() && saved_digests.size() != n)
    return Status::corrupt(fmt::format("{}/trainer.json: train_data.source_digests has {} {} for the blend's {} "
                                       "sources", dir, saved_digests.size(),
                                       saved_digests.size() == 1 ? "entry" : "entries", n));
  if (!saved_digests.is_array() || !digests.is_array() || digests.size() != n) return Status::ok();
  const bool globs = saved_train.is_array() && saved_train.size() == n;
  auto changed = [&](size_t i) { return saved_digests[i] != digests[i]; };
  for (size_t i = 0; i < n; ++i) {
    if (!changed(i)) continue;
    for (size_t j = 0; j < n; ++j) {
      if (j == i || !changed(j)) continue;
      const bool samples = saved_digests[i] == digests[j], glob = globs && saved_train[i] == train[j];
      if (samples || glob)
        return Status::invalid_argument(fmt::format(
            "{}: data.train[{}] ({}) holds the {} the checkpoint's run blended as data.train[{}] ({}): a blend ties "
            "each weight and each source's order of samples to its entry's place; list the sources in the "
            "checkpoint's order",
            dir, j, train[j].dump(), samples ? "samples" : "glob", i, globs ? saved_train[i].dump() : "?"));
    }
  }
  return Status::ok();
}

// The weights as a list of numbers ({} where the json is not one).
std::vector<double> weights_of(const nlohmann::json& j) {
  std::vector<double> w;
  if (j.is_array())
    for (const auto& x : j) w.push_back(x.is_number() ? x.get<double>() : 0.0);
  return w;
}

// A resume's evaluation section against the checkpoint's: "" when the held-out sums read the
// same samples (names renamed, or none either way with the same max_sequences), else a note
// that they read others from here (sets added or dropped under a max_sequences, or another
// max_sequences), so eval/loss before and after are not the same measure.
std::string evaluation_note(const nlohmann::json& saved, const nlohmann::json& mine) {
  auto max_of = [](const nlohmann::json& e) {
    return e.is_object() && e.contains("max_sequences") && e["max_sequences"].is_number_integer()
               ? e["max_sequences"].get<int64_t>()
               : int64_t(-1);
  };
  auto sets_of = [](const nlohmann::json& e) {
    return e.is_object() && e.contains("names") && e["names"].is_array() ? e["names"].size() : size_t(0);
  };
  const int64_t was = max_of(saved), now = max_of(mine);
  const size_t sets_was = sets_of(saved), sets_now = sets_of(mine);
  if (was == now && (sets_was == sets_now || now < 0)) return "";
  return "evaluation " +
         (was != now ? "max_sequences " + std::to_string(now) + " (checkpoint: " + std::to_string(was) + ")"
                     : std::string("names ") + (sets_now ? mine["names"].dump() : "none") + " (checkpoint: " +
                           (sets_was ? saved["names"].dump() : "none") + ")") +
         ": the held-out sums from here read other samples than the interrupted run's (the first max_sequences "
         "of each named set, or of all of data.eval), so eval/loss before and after this step are not the same "
         "measure";
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
  for (const auto& [file, digest] : meta.files) resumed_files[file] = digest.crc32c;
  auto saved = nlohmann::json::parse(meta.config_json);
  auto mine = nlohmann::json::parse(config_to_json(cfg));
  // batch.recompute changes memory and time, not results (and older checkpoints lack it);
  // batch.micro_batch only how a global batch is cut (a resume on another rank count may need
  // another one): the same samples per update, other dropout masks (noted below).
  const int64_t saved_micro = saved["batch"].value("micro_batch", int64_t(0));
  for (auto* j : {&saved, &mine}) {
    (*j)["batch"].erase("recompute");
    (*j)["batch"].erase("micro_batch");
  }
  fill_pre_hidden_act(&saved);
  // A schedule written without min_ratio (a kind other than cosine, or an older build) has none.
  for (auto* j : {&saved, &mine})
    if ((*j)["schedule"].is_object() && !(*j)["schedule"].contains("min_ratio")) (*j)["schedule"]["min_ratio"] = 0.0;
  for (const char* key : {"model", "batch"})
    if (const std::string diff = first_difference(key, saved[key], mine[key]); !diff.empty())
      return Status::invalid_argument(dir + ": incompatible checkpoint: " + diff +
                                      " (a resume continues the same run; a new phase starts with --init-from)");
  // A phase-2 config given --resume instead of --init-from: its data (other sequence lengths)
  // is not what the position and the schedule belong to.
  for (const char* field : {"seq_len", "max_pred"}) {
    const nlohmann::json a = saved["data"].is_object() ? saved["data"].value(field, nlohmann::json()) : nlohmann::json(),
                         b = mine["data"].value(field, nlohmann::json());
    if (!a.is_null() && !same_values(a, b))
      return Status::invalid_argument(dir + ": data." + field + " is " + a.dump() + " in the checkpoint, " + b.dump() +
                                      " in the config: a run resumes on the data it started with; to start a new "
                                      "phase from this checkpoint use --init-from " + dir);
  }
  // A blend's position counts the run's samples; a plain run's, an epoch and the samples of it.
  // Read as the other, or over another number of sources, it is another place in other data.
  const nlohmann::json saved_weights =
      saved["data"].is_object() ? saved["data"].value("weights", nlohmann::json::array()) : nlohmann::json::array();
  const size_t saved_sources = saved_weights.is_array() ? saved_weights.size() : 0;
  if (saved_sources != cfg.data.weights.size()) {
    auto blend_of = [](size_t n) {
      return n == 0 ? std::string("no blend (no data.weights)") : "a blend of " + std::to_string(n) + " sources";
    };
    return Status::invalid_argument(dir + ": data.weights: the checkpoint's run read " + blend_of(saved_sources) +
                                    ", the config asks for " + blend_of(cfg.data.weights.size()) +
                                    ": its data position means nothing there; to start a new phase from this "
                                    "checkpoint use --init-from " + dir);
  }
  if (saved_sources > 0) LB_RETURN_IF_ERROR(check_blend_order(dir, saved, mine, meta.train_data_json, train_data));
  if (meta.step > cfg.schedule.total_steps)
    return Status::invalid_argument(dir + ": the checkpoint is at step " + std::to_string(meta.step) +
                                    ", beyond schedule.total_steps " + std::to_string(cfg.schedule.total_steps) +
                                    " (raise schedule.total_steps to train on)");
  LB_RETURN_IF_ERROR(check_param_layout(dir, meta, model->table()));
  LB_RETURN_IF_ERROR(load_params(dir, &meta));
  OptimizerState state;
  LB_RETURN_IF_ERROR(load_optimizer(dir, meta, &state));
  LB_RETURN_IF_ERROR(updater
                         ->set_state(state, "a resume continues the same run (to go on with another rule: --init-from " +
                                                dir + " with phase.phase_start: reset)")
                         .with_prefix(dir + ": "));
  step = meta.step;
  micro = meta.micro_step;
  pos = meta.data;
  // Its position must start a global batch of data.train (other shards may hold fewer samples).
  Sampler order;
  if (make_sampler(&order).is_ok()) LB_RETURN_IF_ERROR(order.check(pos).with_prefix(dir + ": "));
  if (opts.log && rank0()) {
    std::fprintf(opts.log, "resuming from %s at step %lld\n", dir.c_str(), (long long)step);
    if (const std::string note = train_data_note(meta.train_data_json, train_data); !note.empty())
      std::fprintf(opts.log, "note: %s\n", note.c_str());
    if (saved_micro > 0 && saved_micro != cfg.batch.micro_batch)
      std::fprintf(opts.log,
                   "note: batch.micro_batch %d is not the checkpoint's %lld: the same samples per update, cut into "
                   "other micro-batches (other dropout masks and sums' rounding than the interrupted run's)\n",
                   cfg.batch.micro_batch, (long long)saved_micro);
    // Allowed (a longer schedule, a lower rate after a spike), but no longer the same run:
    // Megatron refuses such a change without a flag; here it is said.
    for (const char* key : {"schedule", "optimizer"})
      if (const std::string diff = first_difference(key, saved[key], mine[key]); !diff.empty())
        std::fprintf(opts.log, "note: %s: the updates from here follow the config's %s, not the interrupted run's\n",
                     diff.c_str(), key);
    // Allowed (a source found too small or too noisy mid-run), but no longer the same run.
    if (saved_sources > 0 && !BlendSchedule::same_shares(weights_of(saved_weights), cfg.data.weights))
      std::fprintf(opts.log,
                   "note: data.weights %s is not the checkpoint's %s: from here each source's share follows the "
                   "config, and its place in its own order is where the new weights would have put it (some of its "
                   "samples may come again or not at all)\n",
                   mine["data"]["weights"].dump().c_str(), saved_weights.dump().c_str());
    // Allowed (evaluation only labels and bounds what is measured), but the held-out sums may
    // then cover other samples: the first max_sequences of each named set, or of all of data.eval.
    if (const std::string note = evaluation_note(saved["evaluation"], mine["evaluation"]); !note.empty())
      std::fprintf(opts.log, "note: %s\n", note.c_str());
    // Allowed (a new seed is a way past a bad stretch of data), but no longer the same run.
    if (meta.seed != cfg.seed)
      std::fprintf(opts.log,
                   "note: seed %llu is not the checkpoint's %llu: the dropout masks and the sample order (of the "
                   "current epoch too, so some of its samples may come again or not at all) differ from the "
                   "interrupted run's from here\n",
                   (unsigned long long)cfg.seed, (unsigned long long)meta.seed);
  }
  return Status::ok();
}

namespace {
// A phase that starts from another run's weights must compute the GELU they were trained with:
// `saved` is that run's name for it (model.hidden_act in its trainer.json).
Status check_same_gelu(const std::string& where, const std::string& saved, kern::GeluForm mine) {
  kern::GeluForm theirs;
  if (!parse_hidden_act(saved, &theirs).is_ok())
    return Status::invalid_argument(where + ": the weights were trained with the activation '" + saved +
                                    "', which lansbert does not compute (model.hidden_act: gelu or gelu_tanh)");
  if (theirs == mine) return Status::ok();
  return Status::invalid_argument(where + ": the weights were trained with hidden_act '" + saved +
                                  "' but the config sets model.hidden_act: " + hidden_act_name(mine));
}

// A Hugging Face directory's config.json against the run's model: the sizes a tensor's shape
// does not show (the heads) and the activation must be the same, and the others are named
// here rather than as the first tensor of another shape.
Status check_same_model(const std::string& where, const BertConfig& theirs, const BertConfig& mine) {
  const struct {
    const char *hf, *ours;
    int a, b;
  } sizes[] = {{"vocab_size", "vocab_size", theirs.vocab_size, mine.vocab_size},
               {"hidden_size", "hidden", theirs.hidden, mine.hidden},
               {"num_hidden_layers", "layers", theirs.layers, mine.layers},
               {"num_attention_heads", "heads", theirs.heads, mine.heads},
               {"intermediate_size", "intermediate", theirs.intermediate, mine.intermediate},
               {"max_position_embeddings", "max_positions", theirs.max_positions, mine.max_positions},
               {"type_vocab_size", "type_vocab", theirs.type_vocab, mine.type_vocab}};
  for (const auto& f : sizes)
    if (f.a != f.b)
      return Status::invalid_argument(where + ": " + f.hf + " is " + std::to_string(f.a) + " but the config sets model." +
                                      f.ours + ": " + std::to_string(f.b));
  if (theirs.hidden_act != mine.hidden_act)
    return Status::invalid_argument(where + ": the weights were trained with hidden_act '" +
                                    hf_hidden_act_name(theirs.hidden_act) + "' but the config sets model.hidden_act: " +
                                    hidden_act_name(mine.hidden_act));
  return Status::ok();
}
}  // namespace

Status Run::init_from(const std::string& spec) {
  std::error_code type_ec;
  if (std::filesystem::exists(spec, type_ec) && !std::filesystem::is_directory(spec, type_ec))
    return Status::invalid_argument("--init-from " + spec + ": a file, not a directory (a lansbert checkpoint "
                                    "directory or a Hugging Face model directory)");
  std::string dir;
  const bool checkpoint = resolve_checkpoint(spec, &dir).is_ok();
  // Every rank takes the same branch: their collectives differ (a rank that saw a Hugging Face
  // directory where rank 0 saw a checkpoint would wait in another collective than rank 0's).
  LB_RETURN_IF_ERROR(check_same_as_rank0(comm, {{"init_from_is_a_lansbert_checkpoint", checkpoint}},
                                         "view of --init-from " + spec,
                                         "put it on a file system every host shares"));
  if (checkpoint) {
    CheckpointMeta meta;
    LB_RETURN_IF_ERROR(read_checkpoint_meta(dir, &meta));
    auto saved = nlohmann::json::parse(meta.config_json);
    fill_pre_hidden_act(&saved);
    LB_RETURN_IF_ERROR(check_same_gelu("--init-from " + dir, saved["model"].value("hidden_act", std::string()),
                                       mc.hidden_act));
    // The sizes, named here: the heads change no tensor's shape, so the weights would load into
    // another model; the others would fail as the first tensor of another shape.
    const nlohmann::json mine = nlohmann::json::parse(config_to_json(cfg))["model"];
    for (const char* field : {"vocab_size", "hidden", "layers", "heads", "intermediate", "max_positions"}) {
      const nlohmann::json a = saved["model"].value(field, nlohmann::json()), b = mine.value(field, nlohmann::json());
      if (!a.is_null() && a != b)
        return Status::invalid_argument("--init-from " + dir + ": the checkpoint's model." + field + " is " + a.dump() +
                                        " but the config sets model." + field + ": " + b.dump());
    }
    // Phase 2 reads shards of phase 1's vocabulary, or its ids name other tokens than the
    // embeddings learnt (checkpoints from before the hash was recorded are not checked).
    if (!meta.train_data_json.empty()) {
      const nlohmann::json phase1 = nlohmann::json::parse(meta.train_data_json)["vocab_hash"];
      const nlohmann::json now = train_data.value("vocab_hash", nlohmann::json());
      if (phase1.is_string() && now.is_string() && phase1 != now)
        return Status::invalid_argument("--init-from " + dir + ": the checkpoint was trained on shards of the vocabulary " +
                                        phase1.get<std::string>() + ", data.train's shards were made with " +
                                        now.get<std::string>() + ": the token ids would mean other tokens; make "
                                        "them with `lansbert prep --vocab` of the first phase's vocabulary");
    }
    LB_RETURN_IF_ERROR(load_params(dir, &meta));
    micro = meta.micro_step;  // dropout masks continue, never repeat phase 1's
    if (cfg.phase_start == PhaseStart::kKeepMoments) {
      LB_RETURN_IF_ERROR(check_param_layout(dir, meta, model->table()));
      OptimizerState state;
      LB_RETURN_IF_ERROR(load_optimizer(dir, meta, &state));
      LB_RETURN_IF_ERROR(updater
                             ->set_state(state, "phase.phase_start keep_moments keeps its moments; start the new "
                                                "rule with phase.phase_start: reset")
                             .with_prefix("--init-from " + dir + ": "));
    }
    LB_RETURN_IF_ERROR(updater->begin_phase(cfg.schedule, flat(), dp->state_elements()));
  } else {
    // A Hugging Face directory: weights only, a fresh optimizer; its config.json (where there
    // is one) must describe the run's model.
    const std::filesystem::path hf_config = std::filesystem::path(spec) / "config.json";
    std::error_code ec;
    if (std::filesystem::exists(hf_config, ec)) {
      BertConfig theirs;
      LB_RETURN_IF_ERROR(read_hf_config(hf_config.string(), &theirs).with_prefix("--init-from "));
      LB_RETURN_IF_ERROR(check_same_model("--init-from " + hf_config.string(), theirs, mc));
    }
    Status st = load_params(spec, nullptr);
    // Not found with the file there is a tensor the file lacks, which the status names.
    if (!st.is_ok() && st.code() == StatusCode::kNotFound &&
        !std::filesystem::exists(std::filesystem::path(spec) / "model.safetensors", ec))
      return Status::not_found("--init-from " + spec + ": neither a lansbert checkpoint nor a directory with " +
                               "model.safetensors" + pytorch_weights_hint(spec));
    LB_RETURN_IF_ERROR(st);
    if (opts.log && rank0() && cfg.phase_start == PhaseStart::kKeepMoments)
      std::fprintf(opts.log, "note: %s holds weights only: the optimizer starts fresh (phase.phase_start "
                             "keep_moments needs a lansbert checkpoint)\n", spec.c_str());
  }
  if (opts.log && rank0()) std::fprintf(opts.log, "initialised from %s\n", spec.c_str());
  return Status::ok();
}

namespace {
// A checkpoint never holds weights that are not finite: a `latest` that did would put every
// retry of the job back into the same NaNs. Finite gradients can still write them (an update
// with a learning rate far too high), so the weights are looked at, once per checkpoint.
Status check_weights_finite(const ParamTable& table, const float* params) {
  for (const ParamEntry& e : table.entries()) {
    size_t bad = 0;
    for (size_t i = 0; i < size_t(e.numel); ++i) bad += !std::isfinite(params[e.offset + i]);
    if (bad)
      return Status::diverged(std::to_string(bad) + " weights of " + e.name + " (the first tensor holding any) are "
                              "not finite: the training diverged; " + kDivergedFix);
  }
  return Status::ok();
}
}  // namespace

Status Run::finish_checkpoint() {
  if (!cfg.checkpoint.async) return Status::ok();  // the same config on every rank: none waits
  Status st;
  if (writing) {
    st = writing->wait();
    writing.reset();
  }
  st = agree_across_ranks(comm, st, "writing a checkpoint on rank 0", &Status::io_error);
  const int64_t written = writing_step;
  writing_step = -1;
  if (written < 0) return Status::ok();
  if (!st.is_ok()) {
    saved_step = -1;  // not written: stop_after_checkpoint writes the step it stops at
    return st.with_prefix("checkpoint of step " + std::to_string(written) + " not written in the background (" +
                          (result->checkpoint.empty() ? std::string("no earlier one in this run")
                                                      : "the last one, " + result->checkpoint + ", is intact") +
                          "): ");
  }
  result->checkpoint = checkpoint_step_dir(cfg.checkpoint.dir, written);
  return Status::ok();
}

Status Run::save(bool final, bool in_background) {
  LB_CHECK_MSG(writing_step < 0, "save() while a checkpoint is written in the background: finish_checkpoint first");
  const double t0 = now_s();
  CheckpointMeta meta;
  meta.step = step;
  meta.micro_step = micro;
  meta.data = pos;
  meta.seed = cfg.seed;
  meta.world = comm.world();
  meta.config_json = config_to_json(cfg);
  meta.train_data_json = train_data.dump();
  meta.optimizer = updater->state();
  HostCopies h(device.get(), model->params(), elements(), m.data(), v.data(), dp->state_elements());
  // Every rank holds all the weights (the same on each), so each finds the same answer; agreed
  // on all the same, as every step a rank could fail alone.
  Status st = agree_across_ranks(comm, check_weights_finite(model->table(), h.params), "checking the weights",
                                 &Status::diverged);
  if (st.is_ok() && in_background) {
    if (rank0()) {
      HostCopies::Owned copies = h.take();
      writing = std::make_unique<BackgroundCheckpoint>(cfg.checkpoint.dir, meta, model->table(),
                                                       std::move(copies.params), std::move(copies.m),
                                                       std::move(copies.v), cfg.checkpoint.keep_last);
    }
    writing_step = step;
    saved_step = step;
    result->t_checkpoint += now_s() - t0;
    return Status::ok();
  }
  if (st.is_ok())
    st = dp->save(cfg.checkpoint.dir, meta, h.params, h.m, h.v, cfg.checkpoint.keep_last, final, &result->checkpoint);
  result->t_checkpoint += now_s() - t0;
  if (!st.is_ok())
    return st.with_prefix("checkpoint of step " + std::to_string(step) + " not written (" +
                          (result->checkpoint.empty() ? std::string("no earlier one in this run")
                                                      : "the last one, " + result->checkpoint + ", is intact") +
                          "): ");
  saved_step = step;
  return st;
}

}  // namespace lansbert::trainer_detail
