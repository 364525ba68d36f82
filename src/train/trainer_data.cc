// Run::open_data: the training and held-out shards against the config (sequence length,
// masked slots, masking mode) and the model's vocab_size (trainer_run.h).
#include <algorithm>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "lansbert/data/vocab.h"
#include "lansbert/train/evaluate.h"
#include "trainer_run.h"

namespace lansbert {

ShardSetOptions shard_set_options(const TrainConfig& cfg, bool training) {
  ShardSetOptions so;
  so.format = cfg.data.format == "lbs" ? ShardFormat::kLbs : cfg.data.format == "hdf5" ? ShardFormat::kHdf5
                                                                                      : ShardFormat::kAny;
  so.training_only = training && so.format == ShardFormat::kHdf5;
  return so;
}

namespace trainer_detail {

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
  ShardSetOptions so = shard_set_options(cfg, true);
  if (!cfg.data.vocab.empty()) {
    Vocab vocab;
    Status st = Vocab::load(cfg.data.vocab, &vocab);
    if (!st.is_ok()) return Status(st.code() == StatusCode::kNotFound ? Status::not_found("data.vocab: " + st.message())
                                                                      : Status::invalid_argument("data.vocab: " + st.message()));
    so.vocab_hash = vocab.hash();
    so.vocab_source = "data.vocab " + cfg.data.vocab;
    *is_continuation = vocab.continuation_flags();
  }
  so.token_limit = mc.vocab_size;
  so.segment_limit = mc.type_vocab;
  Status st;
  if (cfg.data.weights.empty()) {
    st = ShardSet::open(cfg.data.train, so, &shards);
  } else {
    std::vector<std::vector<std::string>> sources;
    for (const std::string& pattern : cfg.data.train) sources.push_back({pattern});
    st = ShardSet::open_sources(sources, so, &shards, "data.train");
  }
  if (!st.is_ok()) return st.with_prefix("data.train: ");
  if (!cfg.data.weights.empty()) {
    for (size_t s = 0; s < cfg.data.train.size(); ++s)
      if (shards->source_sizes()[s] == 0)  // (NVIDIA's HDF5 files may hold none)
        return Status::invalid_argument(fmt::format("data.train[{}]: the files of {} hold no samples, and "
                                                    "data.weights[{}] asks for some",
                                                    s, cfg.data.train[s], s));
    auto schedule = std::make_shared<BlendSchedule>();
    LB_RETURN_IF_ERROR(BlendSchedule::create(cfg.data.weights, "data.weights", schedule.get()));
    blend = std::move(schedule);
  }
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
  if (cfg.data.whole_word && !shards->dynamic_masking() && !shards->all_whole_word())
    return Status::invalid_argument(
        "data.whole_word: data.train holds shards masked by prep without --whole-word; prep them with "
        "--whole-word (or --dynamic-masking, to mask at load time), or drop data.whole_word");
  // A blend repeats its sources as their weights ask; one order of all samples needs a batch's worth.
  if (!blend && shards->count() < cfg.batch.global_batch)
    return Status::invalid_argument("batch.global_batch: " + std::to_string(cfg.batch.global_batch) +
                                    " exceeds the " + std::to_string(shards->count()) + " samples of data.train");
  if (cfg.data.eval.empty()) return Status::ok();
  so.training_only = shard_set_options(cfg, false).training_only;
  st = open_eval_shards(cfg.data.eval, cfg.evaluation.names, so, "data.eval", &eval_shards);
  if (!st.is_ok()) return st.with_prefix("data.eval: ");
  // Without data.vocab nothing compared the two sets' vocabularies (with it, each was).
  if (shards->info() && eval_shards->info() && shards->info()->vocab_hash != eval_shards->info()->vocab_hash)
    return Status::invalid_argument(fmt::format(
        "data.eval: the shards were made with another vocabulary (hash {}) than the data.train shards "
        "(hash {}): make them with `lansbert prep --vocab` of the same file",
        vocab_hash_text(eval_shards->info()->vocab_hash), vocab_hash_text(shards->info()->vocab_hash)));
  if (eval_shards->count() == 0)  // every evaluation would log a loss of 0 over 0 sequences
    return Status::invalid_argument("data.eval: the shards hold no samples: nothing to evaluate");
  for (size_t i = 0; i < cfg.evaluation.names.size(); ++i)
    if (eval_shards->source_sizes()[i] == 0)
      return Status::invalid_argument(fmt::format("data.eval[{}] ({}): the files of {} hold no samples: nothing to "
                                                  "evaluate",
                                                  i, cfg.evaluation.names[i], cfg.data.eval[i]));
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
  eval_parts = eval_sets(*eval_shards, cfg.evaluation.names, cfg.evaluation.max_sequences, "data.eval");
  Batch one;
  one.resize(1, eval_shards->seq_len(), eval_shards->max_pred());
  for (const EvalSet& part : eval_parts) {
    int64_t masked = 0;
    for (int64_t i = part.begin; i < part.end; ++i) {
      LB_RETURN_IF_ERROR(eval_shards->read(i, &one, 0).with_prefix("data.eval: "));
      for (int32_t id : one.masked_ids) masked += id != Batch::kIgnore;
    }
    // What the evaluation would refuse at its first pass (evaluate_sets_on_ranks), perhaps days in.
    const Status st = check_some_tokens_masked(part.end - part.begin, masked);
    if (!st.is_ok()) return st.with_prefix(part.name.empty() ? "data.eval: " : part.label + ": ");
  }
  return Status::ok();
}

Status Run::make_sampler(Sampler* out) const {
  return lansbert::make_sampler(*shards, blend, cfg.seed, cfg.batch.global_batch, comm.world(), comm.rank(),
                                cfg.batch.micro_batch, out);
}

Status Run::view_of_the_job(nlohmann::json* out) const {
  nlohmann::json j = nlohmann::json::parse(config_to_json(cfg));
  j["command_line"] = {{"resume", opts.resume}, {"init_from", opts.init_from}, {"stop_at_step", opts.stop_at_step}};
  uint32_t digest = 0;
  LB_RETURN_IF_ERROR(shards->sample_digest(&digest).with_prefix("data.train: "));
  j["shards"] = {{"train_samples", shards->count()}, {"train_files", shards->num_shards()}, {"train_digest", digest}};
  if (blend) {
    std::vector<uint32_t> digests;
    LB_RETURN_IF_ERROR(shards->source_digests(&digests).with_prefix("data.train: "));
    j["shards"]["train_source_samples"] = shards->source_sizes();
    j["shards"]["train_source_digests"] = digests;
  }
  if (eval_shards) {
    LB_RETURN_IF_ERROR(eval_shards->sample_digest(&digest).with_prefix("data.eval: "));
    j["shards"]["eval_samples"] = eval_shards->count();
    j["shards"]["eval_files"] = eval_shards->num_shards();
    j["shards"]["eval_digest"] = digest;
    if (!cfg.evaluation.names.empty()) j["shards"]["eval_set_samples"] = eval_shards->source_sizes();
  }
  *out = std::move(j);
  return Status::ok();
}

}  // namespace trainer_detail
}  // namespace lansbert
