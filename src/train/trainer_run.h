// The state of one `lansbert train` run and the steps it takes, shared by the files that
// implement them: trainer.cc (setup, output checks, evaluation and the step loop),
// trainer_data.cc (the shards against the config and the model) and trainer_restore.cc
// (resume, --init-from and saving checkpoints). Private to src/train.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "lansbert/core/buffer.h"
#include "lansbert/core/dir_lock.h"
#include "lansbert/data/loader.h"
#include "lansbert/model/bert_model.h"
#include "lansbert/train/data_parallel.h"
#include "lansbert/train/device_backend.h"
#include "lansbert/train/metrics.h"
#include "lansbert/train/trainer.h"
#include "background_checkpoint.h"

namespace lansbert::trainer_detail {

// What a diverged run (non-finite gradients past the scaler's limits, or non-finite weights at
// a checkpoint) tells the user to do; resumed unchanged it diverges the same way again.
inline constexpr const char* kDivergedFix =
    "continue from the newest checkpoint with --resume latest and a lower optimizer.lr (--set optimizer.lr=...)";

// Seconds on a monotonic clock (phase timings of TrainResult).
double now_s();

// One run_training call: the config, the ranks, the backend, model, optimizer and data, and
// where the run stands (step, micro-step, data position).
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
  // What each evaluation reads of eval_shards: one set, or with evaluation.names one per
  // data.eval entry (eval_sets, evaluate.h).
  std::vector<EvalSet> eval_parts;
  // data.weights' blend of data.train's entries (each a source of `shards`); null without.
  std::shared_ptr<const BlendSchedule> blend;
  std::unique_ptr<Loader> loader;
  int64_t step = 0;
  uint64_t micro = 0;  // micro-batches of micro_batch sequences done by all ranks together
  DataPosition pos;
  // {"samples", "files", "digest"[, "vocab_hash"]} of data.train (from view_of_the_job):
  // written into each checkpoint; restore() notes a change of the first three, --init-from
  // refuses another vocab_hash.
  nlohmann::json train_data;
  // {file: CRC32C} of the checkpoint resumed, as trainer.json lists them (null otherwise): the
  // ranks compare it, so that a rank reading another run's checkpoint of the same step (a
  // node-local checkpoint.dir) is refused rather than mixing its optimizer slice in.
  nlohmann::json resumed_files;
  TrainResult* result = nullptr;
  int64_t first_step = 0;   // where this run's loop started (0, or the resumed step)
  int64_t saved_step = -1;  // the step of this run's last checkpoint (set by save())
  DirLock checkpoint_lock;  // rank 0's, on checkpoint.dir, for the whole run (check_outputs)
  // checkpoint.async: rank 0's checkpoint being written, null when none is (on every other
  // rank always). Declared after the lock and the model: its destructor waits for the write
  // while both are still there.
  std::unique_ptr<BackgroundCheckpoint> writing;
  int64_t writing_step = -1;  // every rank: the step of the checkpoint being written, or -1

  FlatBuffers flat() {
    FlatBuffers b{model->params(), model->grads(), m.data(), v.data()};
    b.half_params = model->weight_copy();  // null unless enabled (run_training)
    b.half_format = model->weight_copy_format();
    return b;
  }
  size_t elements() const { return model->table().total_elements(); }
  bool rank0() const { return comm.rank() == 0; }

  Status open_data(std::vector<bool>* is_continuation);
  // The data order of data.train (and data.weights) for this rank: what the loader reads by
  // and what a resumed position is checked against.
  Status make_sampler(Sampler* out) const;
  // After open_data: what every rank must agree on before the model is built (the resolved
  // config, the command line's resume options, the shards' sizes and a digest of three of
  // their samples; rank_agreement.h).
  Status view_of_the_job(nlohmann::json* out) const;
  // Checkpoint I/O through host staging when the buffers live on a device. The weights are
  // read by rank 0 and broadcast (load_params_on_ranks); meta null: a Hugging Face directory.
  Status load_params(const std::string& dir, const CheckpointMeta* meta);
  Status load_optimizer(const std::string& dir, const CheckpointMeta& meta, OptimizerState* state);
  Status restore();
  // After restore(): rank 0 locks checkpoint.dir (no other run writes it while this one
  // does), then checks that the output paths can be written and that no checkpoint would be
  // overwritten (check_checkpoint_root). Collective: every rank learns of rank 0's refusal.
  Status check_outputs();
  Status lock_and_check_outputs();  // rank 0's part
  Status check_vocab_size(int64_t tokens, const std::string& source) const;
  Status init_from(const std::string& spec);
  // Writes the checkpoint of this step; with in_background (checkpoint.async) rank 0 writes it
  // on a thread and the ranks go on. REQUIRES: no write under way (finish_checkpoint first:
  // its failure is the caller's to report).
  Status save(bool final, bool in_background = false);
  // Collective (with checkpoint.async; nothing otherwise): rank 0 waits for the checkpoint
  // being written, if any; its outcome is agreed, and the written one becomes
  // result->checkpoint on every rank.
  Status finish_checkpoint();
  // One pass over data.eval (the first evaluation.max_sequences samples, of each named set),
  // split over the ranks, reduced, logged by rank 0. Returns its wall time in *seconds.
  // Runs the held-out evaluation and logs it; *logged is the log write's status, agreed
  // across ranks (the return value is the evaluation's, also agreed).
  Status evaluate(MetricsLog& log, int64_t total, double* seconds, Status* logged);
  // After an error (agreed across ranks) that left the model and optimizer as the last step
  // did: that step's checkpoint, unless written already, then the error with `fix` and
  // where the run can continue.
  Status stop_after_checkpoint(const Status& failed, const std::string& fix);
  // A diverged run ends (exit 7, no checkpoint of this step): a checkpoint still written in
  // the background ends first, its failure said too, so what the message points to is on
  // disk. The message is `message` and the way on: the newest checkpoint before step
  // `good_before` in checkpoint.dir (INT64_MAX: any) to resume from with a lower learning
  // rate, or, with none, what this run started from. Collective, as finish_checkpoint.
  Status end_diverged(const std::string& message, int64_t good_before);
  Status loop();
};

}  // namespace lansbert::trainer_detail
