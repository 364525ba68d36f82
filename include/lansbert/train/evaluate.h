// Evaluation and export of a trained checkpoint. run_eval computes MLM and NSP loss and
// accuracy over every sample of a held-out shard set in order, in eval mode (no dropout);
// it can also dump its first micro-batch with lansbert's losses as JSON, the reference the
// Hugging Face export check compares against. export_hf writes a directory that
// transformers' BertForPreTraining.from_pretrained loads: model.safetensors with the Hugging
// Face names (the decoder weight is tied to the word embeddings and not stored),
// config.json, vocab.txt and tokenizer_config.json.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "lansbert/core/status.h"
#include "lansbert/data/dataset.h"
#include "lansbert/dist/communicator.h"
#include "lansbert/model/bert_model.h"
#include "lansbert/train/train_config.h"

namespace lansbert {

struct EvalOptions {
  std::vector<std::string> data;  // shard globs
  int micro_batch = 32;
  int64_t max_sequences = -1;     // -1: all
  // The hash of the vocab the checkpoint was trained with (its data.vocab, when that file is
  // still there): our shards must have been made with it.
  std::optional<uint64_t> vocab_hash;
  std::string vocab_source;       // where vocab_hash came from, for messages (ShardSetOptions)
  std::string dump_batch;         // write the first micro-batch and its losses here (JSON)
  // Pack each micro-batch's sequences into shared rows (data.packing, data/packing.h): the same
  // sequences, fewer rows; the losses to rounding. `lansbert eval` takes the run's setting.
  bool packing = false;
  // "cpu", or a registered device backend ("cuda": this rank's device as device_for_rank
  // picks it (device_ranks.h), the checkpoint's weights copied
  // there; GEMMs in `math`, the precision the model was trained with or fp32; kTf32 only on
  // a device, as cpu::make_ops refuses it).
  std::string backend = "cpu";
  GemmMath math = GemmMath::kFp32;
  // A device backend with 16-bit math: the operands converted inside cuBLAS, as the model was
  // trained with precision.gemm_cast: cublas (so the evaluation repeats the training's own).
  bool cast_in_gemm = false;
  // The directory is a Hugging Face BertForPreTraining directory, not a lansbert checkpoint:
  // its model.safetensors is loaded as it is (it carries no checksum to check).
  bool hugging_face = false;
  // Empty: `data` is one held-out set. Else one name per `data` entry, each entry a set of its
  // own, evaluated on its first max_sequences samples and reported apart (evaluation.names).
  std::vector<std::string> names;
  std::string data_key = "--data";  // how messages name `data` ("data.eval": the run's own)
};

struct EvalResult {
  int64_t sequences = 0, masked = 0;
  int64_t rows = 0;  // token rows the model computed on: `sequences`, or fewer when packed
  double mlm_loss = 0, nsp_loss = 0;  // means over masked tokens / sequences
  double mlm_accuracy = 0, nsp_accuracy = 0;
};

// The sums of an evaluation pass; add them over ranks (all_reduce of v), then result().
struct EvalSums {
  enum : int { kMlmLoss, kNspLoss, kMlmCorrect, kNspCorrect, kMasked, kSequences, kRows, kCount };
  double v[kCount] = {};
  EvalResult result() const;
  EvalSums& operator+=(const EvalSums& o);
};

// A held-out set of an evaluation: samples [begin, end) of the shard set, reported under
// `name` ("" for the one set without names); `label` says where it came from in messages
// ("data.eval[1] (books)").
struct EvalSet {
  std::string name, label;
  int64_t begin = 0, end = 0;
};

// Names of held-out sets (evaluation.names, eval --names): each becomes a TensorBoard tag
// (eval/<name>/loss) and a JSON key, so 1 to 64 letters, digits, '_', '-' or '.', and no two
// alike. invalid_argument starting "`key`: ", naming the entry.
Status check_eval_set_names(const std::vector<std::string>& names, const std::string& key);

// The sets an evaluation reads from `set`: without names, its first `max_sequences` samples
// (-1: all) as one set; with names, one set per source of `set` (opened by
// ShardSet::open_sources, one source per entry of `key`: "data.eval", "--data"), each its first
// `max_sequences` samples. REQUIRES: names empty or one per source.
std::vector<EvalSet> eval_sets(const ShardSet& set, const std::vector<std::string>& names, int64_t max_sequences,
                               const std::string& key);
// Opens `globs` as eval_sets reads them: one set, or with names one source per entry (a file
// in two entries refused, naming both).
Status open_eval_shards(const std::vector<std::string>& globs, const std::vector<std::string>& names,
                        const ShardSetOptions& opts, const std::string& key, std::unique_ptr<ShardSet>* out);

// Evaluates samples [0, n) of `set` with `model` in eval mode (no dropout), in micro-batches
// of at most `micro_batch` consecutive samples; micro-batch c runs on rank c % world and the
// ranks' sums are added, so every rank count evaluates the same micro-batches (the result
// differs only by the order of the final sums), each packed when `pack` is set (an error then
// names a sequence packing refuses: its sample index). dump_first: as EvalOptions::dump_batch
// (rank 0's first micro-batch, as the model computed it: packed rows when packed). A rank's
// failure (an unreadable record) is every rank's, with its exit code. Collective over `comm`.
// REQUIRES: the set's seq_len/max_pred within the model's limits.
Status evaluate_on_ranks(BertModel<float>& model, ShardSet& set, int64_t n, int micro_batch, bool pack,
                         Communicator& comm, EvalResult* result, const std::string& dump_first = "");
// Each of `sets` evaluated as evaluate_on_ranks evaluates [0, n), in micro-batches of its own
// (none spans two sets), the k-th micro-batch of all of them on rank k % world; `sums` gets each
// set's sums, added over the ranks. A set without a masked token is refused naming its label.
// Collective over `comm`.
Status evaluate_sets_on_ranks(BertModel<float>& model, ShardSet& set, const std::vector<EvalSet>& sets,
                              int micro_batch, bool pack, Communicator& comm, std::vector<EvalSums>* sums,
                              const std::string& dump_first = "");
// invalid_argument when `sequences` samples hold no masked token (`masked` == 0): records
// whose masked slots are all empty pass every reader check (a shard's max_pred only bounds
// them) and would report an MLM loss and accuracy of 0 over nothing. Shared by the
// evaluation and by `lansbert train`'s start-up check of its held-out shards.
Status check_some_tokens_masked(int64_t sequences, int64_t masked);

// What an evaluation's model is laid out for: forward passes only, so the layers may share
// their activation memory (the recomputing layout; nothing is recomputed without a backward).
ModelLimits eval_limits(int micro_batch, int seq_len, int max_pred);
// run_eval's check before the model allocates (a failed allocation there is fatal): the fp32
// weights and the forward arena of `micro_batch` sequences (an estimate: a half-precision
// run's 16-bit copies come on top) against `have` bytes of `where` ("this host's memory").
// invalid_argument naming both sizes and a --micro-batch that fits; have <= 0: no check.
Status check_eval_batch_fits(const BertConfig& model, int micro_batch, int seq_len, int max_pred, double have,
                             const std::string& where);

// `model` gives the sizes; params come from the checkpoint directory `dir` (or the Hugging
// Face directory, opts.hugging_face). Under mpirun (`comm` of several ranks) the micro-batches
// are spread over the ranks as in evaluate_on_ranks, each rank on the device of its local
// rank; every rank gets the result, and an error on any rank is every rank's. Collective over
// `comm`. With opts.names, `result` sums all the sets and `sets` (when given) gets each one's,
// in the names' order.
Status run_eval(const BertConfig& model, const std::string& dir, const EvalOptions& opts, Communicator& comm,
                EvalResult* result, std::vector<EvalResult>* sets = nullptr);
// One process.
Status run_eval(const BertConfig& model, const std::string& dir, const EvalOptions& opts,
                EvalResult* result, std::vector<EvalResult>* sets = nullptr);

struct ExportOptions {
  std::string out;
  bool force = false;  // allow a non-empty out directory
  std::string vocab;   // vocab.txt to copy (default: the config's data.vocab)
  // What model.safetensors stores: fp32 (the checkpoint's values), or bf16 / fp16 (rounded
  // to nearest, half the bytes; config.json's torch_dtype says which). fp16 refuses weights
  // beyond 65504.
  std::string dtype = "fp32";
};

Status export_hf(const TrainConfig& cfg, const std::string& dir, const ExportOptions& opts);

}  // namespace lansbert
