// `lansbert eval` and `lansbert export`: both open a checkpoint (trainer.json; the weights,
// the one other file they read, are checked as they are loaded; `lansbert verify` checks the
// others), read back the config it was trained with, and either evaluate it on held-out
// shards or write a Hugging Face BertForPreTraining directory. eval also takes such a
// directory, to put a published model's numbers beside a run's on the same shards.
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <optional>
#include <string>

#include <nlohmann/json.hpp>

#include "commands.h"
#include "lansbert/config/config_loader.h"
#include "lansbert/core/check.h"
#include "lansbert/core/file_io.h"
#include "lansbert/dist/mpi_session.h"
#include "lansbert/data/vocab.h"
#include "lansbert/model/hf_config.h"
#include "lansbert/train/checkpoint.h"
#include "lansbert/train/device_ranks.h"
#include "lansbert/train/evaluate.h"
#include "lansbert/train/rank_agreement.h"

namespace lansbert::cli {
namespace {

// The config a resolved checkpoint directory was trained with, and (when `step` is given) the
// global batches it had trained.
Status read_checkpoint_config(const std::string& dir, TrainConfig* cfg, int64_t* step = nullptr) {
  CheckpointMeta meta;
  LB_RETURN_IF_ERROR(read_checkpoint_meta(dir, &meta));
  if (step) *step = meta.step;
  // Builds before the schedule refused keys its kind ignores stored them as given; eval and
  // export never use the schedule, so such keys are read as the run used them: not at all.
  nlohmann::json config = nlohmann::json::parse(meta.config_json);
  if (nlohmann::json& sched = config["schedule"]; sched.is_object()) {
    const std::string kind = sched.contains("kind") && sched["kind"].is_string() ? sched["kind"].get<std::string>()
                                                                                 : std::string("lans");
    if (kind != "lans")
      for (const char* key : {"constant_ratio", "constant_steps", "power"}) sched.erase(key);
    if (kind == "constant")
      for (const char* key : {"warmup_ratio", "warmup_steps"}) sched.erase(key);
    for (const char* key : {"warmup_steps", "constant_steps"})  // below -1 meant "not set" then
      if (sched.contains(key) && sched[key].is_number_integer() && sched[key].get<int64_t>() < -1) sched.erase(key);
  }
  return parse_train_config(config.dump(), dir + "/trainer.json", {}, 1, cfg);
}

Status open_checkpoint(const std::string& spec, std::string* dir, TrainConfig* cfg) {
  LB_RETURN_IF_ERROR(resolve_checkpoint(spec, dir));
  return read_checkpoint_config(*dir, cfg);
}

// A checkpoint's config keeps paths as training saw them. When `st` is "not found" for one of
// `paths` that is relative, the message says where it came from and which flag to pass.
Status hint_relative_path(const Status& st, const std::vector<std::string>& paths, const char* key,
                          const char* flag) {
  if (st.code() != StatusCode::kNotFound) return st;
  for (const std::string& p : paths)
    if (!p.empty() && p[0] != '/' && st.message().find(p) != std::string::npos)
      return st.with_prefix(std::string(key) + " of the checkpoint's config (paths are as training saw them, "
                            "relative to its working directory; pass " + flag + "): ");
  return st;
}

struct EvalArgs {
  std::string checkpoint;
  std::vector<std::string> data;
  std::vector<std::string> names;         // one per --data entry: each a set reported apart
  std::optional<int> micro_batch;         // default: the run's batch.micro_batch
  std::optional<int64_t> max_sequences;   // default: evaluation.max_sequences on data.eval, else all
  std::string dump_batch;
  std::string backend;  // default: cpu
  std::string packing;  // on | off; default: the run's data.packing (off for a Hugging Face directory)
  bool json = false;    // one JSON line on stdout instead of the three text lines
};

// What the evaluation reads and how, from the flags and the checkpoint's config.
struct EvalPlan {
  std::string dir;  // the checkpoint
  EvalOptions options;
  BertConfig model;
  bool own_eval = false;  // the run's data.eval (no --data)
  int64_t step = -1;      // the checkpoint's step; -1 for a Hugging Face directory
};

// The flags every evaluation takes, over the defaults `micro_batch` and `max_sequences`.
Status plan_batches(const EvalArgs& a, int micro_batch, int64_t max_sequences, bool packing, EvalOptions* o) {
  if (!a.names.empty() && a.names.size() != a.data.size())
    return Status::invalid_argument("--names: " + std::to_string(a.names.size()) + " names for " +
                                    std::to_string(a.data.size()) + " --data entries (one each)");
  LB_RETURN_IF_ERROR(check_eval_set_names(a.names, "--names"));
  o->micro_batch = a.micro_batch.value_or(micro_batch);
  if (o->micro_batch <= 0) return Status::invalid_argument("--micro-batch must be positive");
  o->max_sequences = a.max_sequences.value_or(max_sequences);
  if (o->max_sequences == 0 || o->max_sequences < -1)
    return Status::invalid_argument("--max-sequences must be positive, or -1 for every sequence");
  o->dump_batch = a.dump_batch;
  // --dump-batch's rows are read by other tools (Hugging Face's model) as BERT's own, one
  // sequence each: it evaluates unpacked unless --packing on says otherwise.
  o->packing = a.packing.empty() ? packing && a.dump_batch.empty() : a.packing == "on";
  o->backend = a.backend.empty() ? "cpu" : a.backend;
  return Status::ok();
}

// The hash of the vocab file at `path` (`what` says whose it is), when it is there: the shards
// must have been made with it. A file that is there but does not load is an error naming it,
// not a check quietly skipped, unless `as_trained` (a checkpoint's config, whose paths are as
// training saw them) and `path` is relative: from another directory it may name some other
// file (not checked, then). A Hugging Face directory's vocab.txt is that directory's own.
Status note_vocab(const std::string& path, const std::string& what, bool as_trained, EvalOptions* o) {
  std::error_code ec;
  if (path.empty() || !std::filesystem::exists(path, ec)) return Status::ok();
  const bool relative = as_trained && std::filesystem::path(path).is_relative();
  Vocab vocab;
  if (const Status st = Vocab::load(path, &vocab); !st.is_ok()) return relative ? Status::ok() : st.with_prefix(what + ": ");
  o->vocab_hash = vocab.hash();
  o->vocab_source = what + " " + path + (relative ? " (a relative path, read from the current directory)" : "");
  return Status::ok();
}

// A Hugging Face BertForPreTraining directory (config.json and model.safetensors: what
// transformers' save_pretrained writes, Google's BERT as published, an export of ours),
// evaluated with its own sizes on the same shards as a run's checkpoints: a published model's
// held-out numbers beside the run's. It names no held-out data, and computes in fp32.
Status plan_hf_eval(const EvalArgs& a, EvalPlan* p) {
  const std::filesystem::path dir(a.checkpoint);
  p->dir = a.checkpoint;
  LB_RETURN_IF_ERROR(read_hf_config((dir / "config.json").string(), &p->model));
  EvalOptions& o = p->options;
  if (a.data.empty())
    return Status::invalid_argument("eval: " + a.checkpoint + " is a Hugging Face directory, which names no held-out "
                                    "data: pass --data");
  o.data = a.data;
  o.names = a.names;
  LB_RETURN_IF_ERROR(plan_batches(a, 32, -1, false, &o));
  LB_RETURN_IF_ERROR(note_vocab((dir / "vocab.txt").string(), "the Hugging Face directory's vocab", false, &o));
  o.hugging_face = true;
  return Status::ok();
}

Status plan_eval(const EvalArgs& a, EvalPlan* p) {
  const Status found = resolve_checkpoint(a.checkpoint, &p->dir);
  std::error_code ec;
  const std::filesystem::path d(a.checkpoint);
  if (!found.is_ok() && std::filesystem::exists(d / "model.safetensors", ec) &&
      std::filesystem::exists(d / "config.json", ec))
    return plan_hf_eval(a, p);
  // A 'latest' pointer that points nowhere: resolve_checkpoint's message names it.
  const bool dangling_latest = std::filesystem::is_symlink(std::filesystem::symlink_status(d / "latest", ec));
  if (!found.is_ok() && !dangling_latest && std::filesystem::exists(a.checkpoint, ec))
    return Status::not_found(a.checkpoint + ": neither a checkpoint (trainer.json, or a 'latest' pointer) nor a "
                             "Hugging Face directory (config.json and model.safetensors)" +
                             pytorch_weights_hint(a.checkpoint));
  LB_RETURN_IF_ERROR(found);
  TrainConfig cfg;
  LB_RETURN_IF_ERROR(read_checkpoint_config(p->dir, &cfg, &p->step));
  EvalOptions& o = p->options;
  // Without --data, the run's own held-out set, as many sequences and in the same
  // micro-batches as its evaluations during training: the same numbers.
  p->own_eval = a.data.empty();
  o.data = p->own_eval ? cfg.data.eval : a.data;
  if (o.data.empty()) return Status::invalid_argument("eval: no --data given and the config has no data.eval");
  if (p->own_eval && !a.names.empty())
    return Status::invalid_argument("eval: --names goes with --data (the run's data.eval is named by its "
                                    "evaluation.names)");
  o.names = p->own_eval ? cfg.evaluation.names : a.names;
  if (p->own_eval) o.data_key = "data.eval";
  LB_RETURN_IF_ERROR(
      plan_batches(a, cfg.batch.micro_batch, p->own_eval ? cfg.evaluation.max_sequences : -1, cfg.data.packing, &o));
  // The vocab the model was trained with, if its file is still where the config said.
  LB_RETURN_IF_ERROR(note_vocab(cfg.data.vocab, "the checkpoint's data.vocab", true, &o));
  // The GEMM precision the checkpoint was trained with (on the CPU, bf16/fp16 are emulated;
  // TF32 becomes fp32 there).
  o.math = cfg.gemm_math();
  if (o.backend == "cpu" && o.math == GemmMath::kTf32) o.math = GemmMath::kFp32;
  o.cast_in_gemm = o.backend != "cpu" && cfg.cast_in_gemm();  // the CPU emulates the cast kernels
  return cfg.resolve_model(&p->model);
}

// --dump-batch writes a new file or replaces an earlier dump (a rerun of the same command);
// anything else that exists (a shard, a checkpoint's weights, a config named by mistake) is
// left alone. A dump starts `{\n "batch": ` (evaluate.cc dump_batch).
Status check_dump_path(const std::string& path) {
  std::error_code ec;
  if (std::filesystem::exists(std::filesystem::symlink_status(path, ec))) {
    std::ifstream f(path, std::ios::binary);
    char head[12] = {};
    const bool earlier_dump = std::filesystem::is_regular_file(path, ec) && f.read(head, sizeof head) &&
                              std::string_view(head, sizeof head) == "{\n \"batch\": ";
    if (!earlier_dump)
      return Status::invalid_argument("--dump-batch: " + path + " exists and is not an earlier dump; eval writes a "
                                      "new file or replaces a dump: remove it or name another");
  }
  return check_can_create(path, PathKind::kFile, "--dump-batch");
}

// --json: what the text lines say, for scripts that compare checkpoints (a sweep over a run's
// checkpoints, a published model beside them). `step` is null for a Hugging Face directory.
void print_eval_json(const EvalPlan& p, int ranks, const EvalResult& r, const std::vector<EvalResult>& sets) {
  const EvalOptions& o = p.options;
  nlohmann::ordered_json j = {{"checkpoint", p.dir},
                              {"hugging_face", o.hugging_face},
                              {"step", nullptr},
                              {"backend", o.backend},
                              {"gemm_math", gemm_math_name(o.math)},
                              {"cast_in_gemm", o.cast_in_gemm},
                              {"packing", o.packing},
                              {"ranks", ranks},
                              {"sequences", r.sequences},
                              {"rows", r.rows},
                              {"masked", r.masked},
                              {"loss", r.mlm_loss + r.nsp_loss},
                              {"mlm_loss", r.mlm_loss},
                              {"mlm_accuracy", r.mlm_accuracy},
                              {"nsp_loss", r.nsp_loss},
                              {"nsp_accuracy", r.nsp_accuracy}};
  if (p.step >= 0) j["step"] = p.step;
  if (!sets.empty()) {
    nlohmann::ordered_json named = nlohmann::ordered_json::object();
    for (size_t i = 0; i < sets.size(); ++i) {
      const EvalResult& e = sets[i];
      named[o.names[i]] = {{"sequences", e.sequences},   {"rows", e.rows},
                           {"masked", e.masked},         {"loss", e.mlm_loss + e.nsp_loss},
                           {"mlm_loss", e.mlm_loss},     {"mlm_accuracy", e.mlm_accuracy},
                           {"nsp_loss", e.nsp_loss},     {"nsp_accuracy", e.nsp_accuracy}};
    }
    j["sets"] = std::move(named);
  }
  std::printf("%s\n", j.dump().c_str());
}

// Under mpirun the ranks share the micro-batches (run_eval), each on its local rank's device;
// rank 0 prints. Every step that can fail on one rank is agreed on by all (none is left
// waiting in a collective), and a failure ends the job as train's do.
Status run_eval_on(const EvalArgs& a, Communicator& comm) {
  EvalPlan p;
  LB_RETURN_IF_ERROR(agree_across_ranks(comm, plan_eval(a, &p), "reading the checkpoint", nullptr));
  // One kind of directory and one model on every rank (the loads differ in their collectives,
  // and rank 0 broadcasts weights of its model's size), and the options that shape the passes
  // and their collectives (a micro-batch of another size splits the samples otherwise; only
  // ranks asked to dump would check the path). --data and --max-sequences are run_eval's to
  // compare, by what they select.
  const EvalOptions& eo = p.options;
  const nlohmann::json view = {{"checkpoint_is_hugging_face", eo.hugging_face},
                               {"model", nlohmann::json::parse(hf_config_json(p.model, "float32"))},
                               {"micro_batch", eo.micro_batch},
                               {"names", eo.names},
                               {"packing", eo.packing},
                               {"dump_batch", !eo.dump_batch.empty()},
                               {"backend", eo.backend},
                               {"gemm_math", gemm_math_name(eo.math)},
                               {"cast_in_gemm", eo.cast_in_gemm}};
  LB_RETURN_IF_ERROR(check_same_as_rank0(comm, view, "view of --checkpoint " + a.checkpoint + " and eval options",
                                         "give every rank the same command line, and put the checkpoint on a file "
                                         "system every host shares"));
  // Rank 0 writes it (its probe file must not race another rank's).
  if (!p.options.dump_batch.empty())
    LB_RETURN_IF_ERROR(agree_across_ranks(comm, comm.rank() == 0 ? check_dump_path(p.options.dump_batch) : Status::ok(),
                                          "checking --dump-batch", nullptr));
  EvalResult r;
  std::vector<EvalResult> sets;
  Status st = run_eval(p.model, p.dir, p.options, comm, &r, &sets);
  if (p.own_eval) st = hint_relative_path(st, p.options.data, "data.eval", "--data");
  LB_RETURN_IF_ERROR(st);
  if (comm.rank() != 0) return Status::ok();
  // Reported as computed (the numbers are the answer), with a word on what they mean.
  if (!std::isfinite(r.mlm_loss) || !std::isfinite(r.nsp_loss))
    std::fprintf(stderr, "lansbert eval: warning: the losses are not finite: the weights give non-finite values "
                         "(a diverged run's checkpoint?)\n");
  const EvalOptions& o = p.options;
  if (a.json) {
    print_eval_json(p, comm.world(), r, sets);
    return Status::ok();
  }
  const std::string ranks = comm.world() > 1 ? ", " + std::to_string(comm.world()) + " ranks" : "";
  std::printf("%s %s (%s backend, %s GEMMs%s%s%s)\n", o.hugging_face ? "Hugging Face model" : "checkpoint",
              p.dir.c_str(), o.backend.c_str(), gemm_math_name(o.math),
              o.cast_in_gemm ? ", operands converted inside cuBLAS" : "", o.packing ? ", packed" : "", ranks.c_str());
  std::printf("sequences %lld, rows %lld, masked tokens %lld\n", (long long)r.sequences, (long long)r.rows,
              (long long)r.masked);
  std::printf("mlm_loss %.6f mlm_accuracy %.4f nsp_loss %.6f nsp_accuracy %.4f loss %.6f\n", r.mlm_loss,
              r.mlm_accuracy, r.nsp_loss, r.nsp_accuracy, r.mlm_loss + r.nsp_loss);
  // Each named set after the sums of all of them, as the lines above say them.
  for (size_t i = 0; i < sets.size(); ++i) {
    const EvalResult& e = sets[i];
    std::printf("%s: sequences %lld, rows %lld, masked tokens %lld\n", o.names[i].c_str(), (long long)e.sequences,
                (long long)e.rows, (long long)e.masked);
    std::printf("%s: mlm_loss %.6f mlm_accuracy %.4f nsp_loss %.6f nsp_accuracy %.4f loss %.6f\n",
                o.names[i].c_str(), e.mlm_loss, e.mlm_accuracy, e.nsp_loss, e.nsp_accuracy, e.mlm_loss + e.nsp_loss);
  }
  return Status::ok();
}

Status run_eval_cmd(const EvalArgs& a) {
  const std::unique_ptr<Communicator> comm = make_communicator();
  const Status st = run_eval_on(a, *comm);
  if (!st.is_ok() && comm->world() > 1)
    abort_job(st.to_string(), st.exit_code());
  return st;
}

struct ExportArgs {
  std::string checkpoint, out, vocab;
  bool force = false;
  std::string dtype = "fp32";
};

Status run_export_cmd(const ExportArgs& a) {
  std::string dir;
  TrainConfig cfg;
  LB_RETURN_IF_ERROR(open_checkpoint(a.checkpoint, &dir, &cfg));
  ExportOptions o{a.out, a.force, a.vocab, a.dtype};
  Status st = export_hf(cfg, dir, o);
  if (a.vocab.empty()) st = hint_relative_path(st, {cfg.data.vocab}, "data.vocab", "--vocab");
  LB_RETURN_IF_ERROR(st);
  std::printf("exported %s to %s (BertForPreTraining, %s weights)\n", dir.c_str(), a.out.c_str(), a.dtype.c_str());
  return Status::ok();
}

}  // namespace

void add_eval_command(CLI::App& app) {
  auto a = std::make_shared<EvalArgs>();
  CLI::App* sub = app.add_subcommand("eval", "MLM and NSP loss and accuracy of a checkpoint on held-out shards");
  sub->add_option("--checkpoint", a->checkpoint,
                  "Checkpoint directory (or a root with 'latest'), or a Hugging Face BertForPreTraining directory")
      ->required();
  sub->add_option("--data", a->data, "Shard globs (default: the config's data.eval)");
  sub->add_option("--names", a->names,
                  "One name per --data entry: each entry a held-out set of its own, reported apart after the "
                  "sums of all (without --data: the run's evaluation.names)");
  sub->add_option("--micro-batch", a->micro_batch, "Sequences per forward pass (default: the run's batch.micro_batch)");
  sub->add_option("--max-sequences", a->max_sequences,
                  "Evaluate at most this many sequences (of each set, with names); -1: all (default: the run's "
                  "evaluation.max_sequences without --data, all with it)");
  sub->add_option("--backend", a->backend, "cpu (default) or cuda (under mpirun each rank on its local rank's GPU)")
      ->check(CLI::IsMember({"cpu", "cuda"}));
  sub->add_option("--packing", a->packing,
                  "on or off: pack each micro-batch's sequences into shared rows, as data.packing does (default: the "
                  "run's data.packing, off for a Hugging Face directory or with --dump-batch)")
      ->check(CLI::IsMember({"on", "off"}));
  sub->add_flag("--json", a->json,
               "Print one JSON line (checkpoint, step, backend, packing, sequences, rows, masked tokens, losses, "
               "accuracies) instead of the text lines");
  sub->add_option("--dump-batch", a->dump_batch,
                  "Write the first micro-batch and its losses as JSON to this file, for comparing with other "
                  "BERT code on the same inputs (a new file, or an earlier dump it replaces)");
  sub->callback([a] { report(run_eval_cmd(*a)); });
}

void add_export_command(CLI::App& app) {
  auto a = std::make_shared<ExportArgs>();
  CLI::App* sub = app.add_subcommand("export", "Write a checkpoint as a Hugging Face BertForPreTraining directory");
  sub->add_option("--checkpoint", a->checkpoint, "Checkpoint directory (or a root with 'latest')")->required();
  sub->add_option("--out", a->out, "Output directory")->required();
  sub->add_option("--vocab", a->vocab, "vocab.txt to include (default: the config's data.vocab)");
  sub->add_flag("--force", a->force, "Write into a non-empty output directory");
  sub->add_option("--dtype", a->dtype,
                  "Weights as fp32 (the checkpoint's values), bf16 or fp16 (rounded to nearest: half the bytes)")
      ->check(CLI::IsMember({"fp32", "bf16", "fp16"}))
      ->capture_default_str();
  sub->callback([a] { report(run_export_cmd(*a)); });
}

}  // namespace lansbert::cli
