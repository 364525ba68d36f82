// run_eval and export_hf (see evaluate.h).
#include "lansbert/train/evaluate.h"

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <filesystem>
#include <string>
#include <vector>
#include <nlohmann/json.hpp>

#include "lansbert/backend/cpu_ops.h"
#include "lansbert/core/allocator.h"
#include "lansbert/core/file_io.h"
#include "lansbert/data/dataset.h"
#include "lansbert/data/packing.h"
#include "lansbert/train/device_capability.h"
#include "lansbert/data/vocab.h"
#include "lansbert/model/bert_model.h"
#include "lansbert/model/hf_config.h"
#include "lansbert/model/safetensors.h"
#include "lansbert/train/checkpoint.h"
#include "lansbert/train/device_backend.h"
#include "lansbert/train/device_ranks.h"
#include "lansbert/train/rank_agreement.h"
#include "device_run.h"

namespace lansbert {
namespace fs = std::filesystem;
namespace {

Status dump_batch(const std::string& path, const Batch& b, const ForwardResult& r) {
  nlohmann::ordered_json j = {
      {"batch", b.batch},           {"seq_len", b.seq_len},
      {"max_pred", b.max_pred},     {"input_ids", b.input_ids},
      {"segment_ids", b.segment_ids}, {"input_mask", b.input_mask},
      {"masked_positions", b.masked_positions}, {"masked_ids", b.masked_ids},
      {"nsp_labels", b.nsp_labels}, {"mlm_loss", r.mlm_loss},
      {"nsp_loss", r.nsp_loss},     {"total_loss", r.total_loss}};
  if (b.packed()) {  // rows of several sequences (data/packing.h): where each one is
    j["rows"] = b.rows;
    j["sequence_row"] = b.sequence_row;
    j["sequence_start"] = b.sequence_start;
  }
  const std::string text = j.dump(1) + "\n";
  LB_RETURN_IF_ERROR(create_parent_directories(path, "--dump-batch"));
  return write_file_atomic(path, {text});
}

}  // namespace

ModelLimits eval_limits(int micro_batch, int seq_len, int max_pred) {
  return ModelLimits{micro_batch, seq_len, max_pred, Recompute::kLayers};
}

Status check_eval_batch_fits(const BertConfig& mc, int micro_batch, int seq_len, int max_pred, double have,
                             const std::string& where) {
  const double weights = double(make_bert_param_table(mc).total_elements() * sizeof(float));
  const auto need = [&](int b) {
    return weights + double(BertModel<float>::activation_bytes_for(mc, eval_limits(b, seq_len, max_pred)));
  };
  if (have <= 0 || need(micro_batch) <= have) return Status::ok();
  int fits = micro_batch;
  while (fits > 1 && need(fits) > have) fits /= 2;
  char buf[400];
  std::snprintf(buf, sizeof buf,
                "eval: a micro-batch of %d sequences needs about %.1f GiB (weights and activations), more than the "
                "%.1f GiB of %s; %s",
                micro_batch, need(micro_batch) / 1073741824.0, have / 1073741824.0, where.c_str(),
                need(fits) <= have ? ("pass --micro-batch " + std::to_string(fits)).c_str()
                                   : "not even one sequence fits");
  return Status::invalid_argument(buf);
}

EvalResult EvalSums::result() const {
  EvalResult r;
  r.sequences = int64_t(v[kSequences]);
  r.masked = int64_t(v[kMasked]);
  r.rows = int64_t(v[kRows]);
  if (v[kMasked] > 0) r.mlm_loss = v[kMlmLoss] / v[kMasked];
  if (v[kMasked] > 0) r.mlm_accuracy = v[kMlmCorrect] / v[kMasked];
  if (v[kSequences] > 0) r.nsp_loss = v[kNspLoss] / v[kSequences];
  if (v[kSequences] > 0) r.nsp_accuracy = v[kNspCorrect] / v[kSequences];
  return r;
}

EvalSums& EvalSums::operator+=(const EvalSums& o) {
  for (int i = 0; i < kCount; ++i) v[i] += o.v[i];
  return *this;
}

Status check_eval_set_names(const std::vector<std::string>& names, const std::string& key) {
  for (size_t i = 0; i < names.size(); ++i) {
    const std::string& name = names[i];
    const bool plain = !name.empty() && name.size() <= 64 && std::all_of(name.begin(), name.end(), [](char ch) {
      return std::isalnum(static_cast<unsigned char>(ch)) || ch == '_' || ch == '-' || ch == '.';
    });
    if (!plain)
      return Status::invalid_argument(key + ": '" + name + "' (entry " + std::to_string(i) +
                                      "): a name is 1 to 64 letters, digits, '_', '-' or '.' (it becomes a "
                                      "TensorBoard tag and a JSON key)");
    for (size_t j = 0; j < i; ++j)
      if (names[j] == name)
        return Status::invalid_argument(key + ": '" + name + "' names entries " + std::to_string(j) + " and " +
                                        std::to_string(i) + ": each set needs its own name");
  }
  return Status::ok();
}

std::vector<EvalSet> eval_sets(const ShardSet& set, const std::vector<std::string>& names, int64_t max_sequences,
                               const std::string& key) {
  auto first = [&](int64_t size) { return max_sequences >= 0 ? std::min(size, max_sequences) : size; };
  if (names.empty()) return {EvalSet{"", key, 0, first(set.count())}};
  std::vector<EvalSet> sets;
  int64_t begin = 0;
  for (size_t i = 0; i < names.size(); ++i) {
    const int64_t size = set.source_sizes()[i];
    sets.push_back({names[i], key + "[" + std::to_string(i) + "] (" + names[i] + ")", begin, begin + first(size)});
    begin += size;
  }
  return sets;
}

Status open_eval_shards(const std::vector<std::string>& globs, const std::vector<std::string>& names,
                        const ShardSetOptions& opts, const std::string& key, std::unique_ptr<ShardSet>* out) {
  if (names.empty()) return ShardSet::open(globs, opts, out);
  std::vector<std::vector<std::string>> sources;
  for (const std::string& g : globs) sources.push_back({g});
  return ShardSet::open_sources(sources, opts, out, key);
}

namespace {

// The micro-batches of `s` whose place among all the sets' (from `first_chunk` on) is this
// rank's: chunk k of the evaluation runs on rank k % world.
Status evaluate_samples(BertModel<float>& model, ShardSet& set, const EvalSet& s, int64_t first_chunk,
                        int micro_batch, bool pack, int rank, int world, EvalSums* sums, const std::string& dump_first) {
  Batch batch;
  std::vector<int> lengths;
  const int64_t n = s.end - s.begin;
  const int64_t chunks = (n + micro_batch - 1) / micro_batch;
  for (int64_t c = 0; c < chunks; ++c) {
    if ((first_chunk + c) % world != rank) continue;
    const int64_t first = s.begin + c * micro_batch;
    const int b = int(std::min<int64_t>(micro_batch, s.end - first));
    batch.resize(b, set.seq_len(), set.max_pred());
    lengths.resize(size_t(b));
    for (int row = 0; row < b; ++row) {
      LB_RETURN_IF_ERROR(set.read(first + row, &batch, row));
      if (pack) LB_RETURN_IF_ERROR(packable_sample(batch, row, set, first + row, &lengths[size_t(row)]));
    }
    if (pack) pack_checked_batch(&batch, lengths);
    const ForwardResult r = model.forward(batch, StepContext{false, 0, 0});
    if (first_chunk + c == 0 && !dump_first.empty()) LB_RETURN_IF_ERROR(dump_batch(dump_first, batch, r));
    sums->v[EvalSums::kMlmLoss] += r.mlm_loss * double(r.mlm_count);
    sums->v[EvalSums::kNspLoss] += r.nsp_loss * double(r.nsp_count);
    sums->v[EvalSums::kMlmCorrect] += double(r.mlm_correct);
    sums->v[EvalSums::kNspCorrect] += double(r.nsp_correct);
    sums->v[EvalSums::kMasked] += double(r.mlm_count);
    sums->v[EvalSums::kSequences] += double(r.nsp_count);
    sums->v[EvalSums::kRows] += double(batch.rows);
  }
  return Status::ok();
}

}  // namespace

Status evaluate_sets_on_ranks(BertModel<float>& model, ShardSet& set, const std::vector<EvalSet>& sets,
                              int micro_batch, bool pack, Communicator& comm, std::vector<EvalSums>* sums,
                              const std::string& dump_first) {
  sums->assign(sets.size(), EvalSums{});
  Status st;
  int64_t first_chunk = 0;
  for (size_t i = 0; i < sets.size() && st.is_ok(); ++i) {
    st = evaluate_samples(model, set, sets[i], first_chunk, micro_batch, pack, comm.rank(), comm.world(),
                          &(*sums)[i], dump_first);
    first_chunk += (sets[i].end - sets[i].begin + micro_batch - 1) / micro_batch;
  }
  if (Status agreed = agree_across_ranks(comm, st, "the evaluation", nullptr); !agreed.is_ok()) {
    sums->clear();
    return agreed;
  }
  static_assert(sizeof(EvalSums) == sizeof(double) * EvalSums::kCount);
  comm.all_reduce(sums->data()->v, EvalSums::kCount * sums->size(), ReduceOp::kSum);
  // Every rank has the same sums, so all return the same.
  for (size_t i = 0; i < sets.size(); ++i) {
    const EvalResult r = (*sums)[i].result();
    const Status masked = check_some_tokens_masked(r.sequences, r.masked);
    if (!masked.is_ok()) return sets[i].name.empty() ? masked : masked.with_prefix(sets[i].label + ": ");
  }
  return Status::ok();
}

Status evaluate_on_ranks(BertModel<float>& model, ShardSet& set, int64_t n, int micro_batch, bool pack,
                         Communicator& comm, EvalResult* result, const std::string& dump_first) {
  std::vector<EvalSums> sums;
  const Status st = evaluate_sets_on_ranks(model, set, {EvalSet{"", "", 0, n}}, micro_batch, pack, comm, &sums,
                                           dump_first);
  if (!sums.empty()) *result = sums[0].result();
  return st;
}

Status check_some_tokens_masked(int64_t sequences, int64_t masked) {
  if (masked == 0)
    return Status::invalid_argument("the " + std::to_string(sequences) +
                                    " sequences evaluated hold no masked tokens (every masked slot is empty): "
                                    "no masked-LM loss to report; evaluate on shards made with masking");
  return Status::ok();
}

namespace {

// The held-out shards, checked against the checkpoint's model as `lansbert train` checks its data.
Status open_eval_set(const BertConfig& mc, const EvalOptions& opts, std::unique_ptr<ShardSet>* out) {
  ShardSetOptions so;
  so.vocab_hash = opts.vocab_hash;
  so.vocab_source = opts.vocab_source;
  so.token_limit = mc.vocab_size;
  so.segment_limit = mc.type_vocab;
  LB_RETURN_IF_ERROR(open_eval_shards(opts.data, opts.names, so, opts.data_key, out).with_prefix("eval: "));
  const ShardSet& set = **out;
  if (set.dynamic_masking())
    return Status::unsupported("eval: the shards are stored unmasked; evaluate on statically masked shards");
  // It would print a loss of 0 over nothing (as shards whose masked slots are all empty would:
  // evaluate_on_ranks refuses those).
  if (set.count() == 0) return Status::invalid_argument("eval: the shards hold no samples: nothing to evaluate");
  for (size_t i = 0; i < opts.names.size(); ++i)
    if (set.source_sizes()[i] == 0)
      return Status::invalid_argument("eval: " + opts.data_key + "[" + std::to_string(i) + "] (" + opts.names[i] + ", " +
                                      opts.data[i] + "): the files hold no samples: nothing to evaluate");
  if (set.seq_len() > mc.max_positions)
    return Status::invalid_argument("eval: the shards hold sequences of " + std::to_string(set.seq_len()) +
                                    " tokens, more than the model's max_positions " + std::to_string(mc.max_positions));
  if (set.info() && set.info()->vocab_size > mc.vocab_size)
    return Status::invalid_argument("eval: the shards were made with a vocab of " +
                                    std::to_string(set.info()->vocab_size) + " tokens, the model has " +
                                    std::to_string(mc.vocab_size));
  return Status::ok();
}

// The device's ops, once the checkpoint's GEMM precision is known to run there.
Status open_eval_ops(DeviceBackend& device, const EvalOptions& opts, std::unique_ptr<Ops<float>>* ops) {
  std::string note;  // tf32 below sm_80 is fp32 there: the numbers are still right
  LB_RETURN_IF_ERROR(check_gemm_math_on_device(opts.math, device.compute_capability(), device.description(),
                                               "eval: the checkpoint's precision.dtype",
                                               "evaluate with --backend cpu (bf16 emulated exactly)", &note));
  DeviceOptions dopts;
  dopts.math = opts.math;
  dopts.cast_in_gemm = opts.cast_in_gemm;
  *ops = device.make_ops(dopts);
  return Status::ok();
}

}  // namespace

// Each step that can fail on one rank alone (its files, its device, its memory) is agreed on
// by all before the next collective, so no rank is left waiting for one that gave up.
Status run_eval(const BertConfig& mc, const std::string& dir, const EvalOptions& opts, Communicator& comm,
                EvalResult* result, std::vector<EvalResult>* set_results) {
  if (!opts.names.empty() && opts.names.size() != opts.data.size())
    return Status::invalid_argument("eval: " + std::to_string(opts.names.size()) + " names for " +
                                    std::to_string(opts.data.size()) + " " + opts.data_key + " entries (one each)");
  std::unique_ptr<ShardSet> set;
  LB_RETURN_IF_ERROR(agree_across_ranks(comm, open_eval_set(mc, opts, &set), "opening the eval data", nullptr));
  const std::vector<EvalSet> sets = eval_sets(*set, opts.names, opts.max_sequences, opts.data_key);
  int64_t n = 0;
  for (const EvalSet& s : sets) n += s.end - s.begin;
  // Ranks that read different files (a node-local path of another content) would add up a
  // mix: each must see rank 0's samples, as the trainer's ranks do (their count, files and a
  // digest of three of them), and evaluate as many.
  uint32_t digest = 0;
  LB_RETURN_IF_ERROR(agree_across_ranks(comm, set->sample_digest(&digest), "reading the eval data", nullptr));
  LB_RETURN_IF_ERROR(check_same_as_rank0(comm,
                                         {{"sequences", n},
                                          {"samples", set->count()},
                                          {"set_samples", set->source_sizes()},
                                          {"files", set->num_shards()},
                                          {"sample_digest", digest}},
                                         "eval data", "give every rank the same --data, --names and --max-sequences"));
  // No larger than the data: the model's buffers are sized for a micro-batch.
  const int micro_batch = int(std::clamp<int64_t>(n, 1, opts.micro_batch));
  // The CPU, or this rank's device of a registered backend (device 0 on one process), the
  // weights staged through the host.
  std::unique_ptr<DeviceBackend> device;
  std::unique_ptr<Ops<float>> ops;
  if (opts.backend == "cpu") {
    ops = cpu::make_ops<float>(opts.math);
  } else {
    LB_RETURN_IF_ERROR(open_device_backend(opts.backend, comm, &device));
    LB_RETURN_IF_ERROR(agree_across_ranks(comm, open_eval_ops(*device, opts, &ops), "opening the device", nullptr));
  }
  // The micro-batch must fit before the model allocates it (a failed allocation is fatal).
  size_t free_b = 0, total_b = 0;
  const double have = !device ? host_memory_bytes()
                      : device->memory_info(&free_b, &total_b) ? double(free_b)
                                                               : 0;
  LB_RETURN_IF_ERROR(agree_across_ranks(
      comm,
      check_eval_batch_fits(mc, micro_batch, set->seq_len(), set->max_pred(), have,
                            !device ? "this host's memory" : "free memory on " + device->description()),
      "the memory check", nullptr));
  BertModel<float> model(mc, *ops, eval_limits(micro_batch, set->seq_len(), set->max_pred()));
  CheckpointMeta meta;
  if (!opts.hugging_face)
    LB_RETURN_IF_ERROR(agree_across_ranks(comm, read_checkpoint_meta(dir, &meta), "reading the checkpoint", nullptr));
  LB_RETURN_IF_ERROR(load_params_on_ranks(comm, device.get(), dir, opts.hugging_face ? nullptr : &meta,
                                          model.table(), model.params()));
  std::vector<EvalSums> sums;
  LB_RETURN_IF_ERROR(
      evaluate_sets_on_ranks(model, *set, sets, micro_batch, opts.packing, comm, &sums, opts.dump_batch));
  EvalSums total;
  for (const EvalSums& s : sums) total += s;
  *result = total.result();
  if (set_results) {
    set_results->clear();
    if (!opts.names.empty())
      for (const EvalSums& s : sums) set_results->push_back(s.result());
  }
  return Status::ok();
}

Status run_eval(const BertConfig& mc, const std::string& dir, const EvalOptions& opts, EvalResult* result,
                std::vector<EvalResult>* sets) {
  const std::unique_ptr<Communicator> one = make_single_process_communicator();
  return run_eval(mc, dir, opts, *one, result, sets);
}

namespace {
// The safetensors dtype and transformers' torch_dtype name of an --dtype.
struct ExportDtype {
  const char* flag;
  StDtype stored;
  const char* torch_name;
};
constexpr ExportDtype kExportDtypes[] = {
    {"fp32", StDtype::kF32, "float32"}, {"bf16", StDtype::kBF16, "bfloat16"}, {"fp16", StDtype::kF16, "float16"}};

const ExportDtype* export_dtype(const std::string& flag) {
  for (const ExportDtype& d : kExportDtypes)
    if (flag == d.flag) return &d;
  return nullptr;
}
}  // namespace

Status export_hf(const TrainConfig& cfg, const std::string& dir, const ExportOptions& opts) {
  // Before the weights are read: a --out that can never be a directory (a file, a path under
  // one, an unwritable parent) fails naming the flag, not with a bare OS message.
  const ExportDtype* dtype = export_dtype(opts.dtype);
  if (!dtype) return Status::invalid_argument("--dtype " + opts.dtype + ": expected fp32, bf16 or fp16");
  LB_RETURN_IF_ERROR(check_can_create(opts.out, PathKind::kDirectory, "--out"));
  std::error_code ec;
  // Not even with --force (so it is said first): its model.safetensors would replace a
  // checkpoint's weights (the one exported, or another), which then fails its checksum.
  if (fs::exists(fs::path(opts.out) / "trainer.json", ec))
    return Status::invalid_argument("--out " + opts.out + ": a lansbert checkpoint (it holds trainer.json), which "
                                    "export never writes into: name another directory");
  // Nor a checkpoint.dir: the export's files among its step-* directories would make it a
  // Hugging Face directory to some readers and a run's checkpoints to others.
  if (!checkpoint_step_dirs(opts.out).empty() || fs::is_symlink(fs::path(opts.out) / "latest", ec))
    return Status::invalid_argument("--out " + opts.out + ": a checkpoint.dir (it holds a run's step-* checkpoints), "
                                    "which export never writes into: name another directory");
  if (fs::exists(opts.out, ec) && !fs::is_empty(opts.out, ec) && !opts.force)
    return Status::invalid_argument("--out " + opts.out + ": directory exists and is not empty (use --force to overwrite)");
  BertConfig mc;
  LB_RETURN_IF_ERROR(cfg.resolve_model(&mc));
  const std::string vocab_path = opts.vocab.empty() ? cfg.data.vocab : opts.vocab;
  if (vocab_path.empty())
    return Status::invalid_argument("export: no vocab.txt (the checkpoint's data.vocab is empty; pass --vocab)");
  Vocab vocab;
  LB_RETURN_IF_ERROR(Vocab::load(vocab_path, &vocab));
  // A vocab_size above the vocab's token count is padding (training allows it only when
  // model.vocab_size says so); Hugging Face loads such a model with the shorter vocab.txt.
  if (vocab.size() > mc.vocab_size)
    return Status::invalid_argument("export: " + vocab_path + " has " + std::to_string(vocab.size()) +
                                    " tokens, more than the model's vocab_size " + std::to_string(mc.vocab_size));
  const ParamTable table = make_bert_param_table(mc);
  std::vector<float> params(table.total_elements(), 0.0f);
  CheckpointMeta meta;
  LB_RETURN_IF_ERROR(read_checkpoint_meta(dir, &meta));
  LB_RETURN_IF_ERROR(load_checkpoint_params(dir, meta, table, params.data()));
  bool cased = false;
  for (const std::string& t : vocab.tokens())
    if (t.size() && t[0] != '[')
      for (char ch : t) cased = cased || (ch >= 'A' && ch <= 'Z');
  fs::create_directories(opts.out, ec);
  if (ec) return Status::io_error("--out " + opts.out + ": " + ec.message());
  const fs::path out(opts.out);
  LB_RETURN_IF_ERROR(write_safetensors((out / "model.safetensors").string(), table, params.data(), {{"format", "pt"}},
                                       dtype->stored)
                         .with_prefix("--dtype " + opts.dtype + ": "));
  LB_RETURN_IF_ERROR(write_file_atomic((out / "config.json").string(), {hf_config_json(mc, dtype->torch_name)}));
  std::string vocab_text;
  LB_RETURN_IF_ERROR(read_file(vocab_path, &vocab_text));
  LB_RETURN_IF_ERROR(write_file_atomic((out / "vocab.txt").string(), {vocab_text}));
  const nlohmann::ordered_json tok = {{"tokenizer_class", "BertTokenizer"},
                                      {"do_lower_case", !cased},
                                      {"model_max_length", mc.max_positions}};
  return write_file_atomic((out / "tokenizer_config.json").string(), {tok.dump(2) + "\n"});
}

}  // namespace lansbert
