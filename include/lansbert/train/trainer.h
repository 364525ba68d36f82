// The training loop of one pretraining phase on one rank: micro-batches from the loader,
// forward/backward with gradient accumulation (loss weight 1/accumulation, so the gradient
// is the mean over micro-batches), the gradient all-reduce over the communicator, one
// Updater step per global batch, metrics every N steps, periodic and final checkpoints,
// exact resume, phase-2 initialisation, and a clean stop on SIGTERM/SIGINT/SIGUSR1. Rank 0 alone
// logs and writes shared files; every rank runs the same control flow, and every decision
// that must agree (stop, checkpoint now) is all-reduced.
#pragma once

#include <cstdint>
#include <cstdio>
#include <functional>
#include <memory>
#include <string>

#include "lansbert/core/status.h"
#include "lansbert/data/blend.h"
#include "lansbert/data/dataset.h"
#include "lansbert/dist/communicator.h"
#include "lansbert/train/evaluate.h"
#include "lansbert/train/train_config.h"

namespace lansbert {

struct TrainOptions {
  std::string resume;         // "", "latest" (the config's checkpoint.dir) or a directory
  std::string init_from;      // phase 2: a lansbert checkpoint or a Hugging Face directory
  int64_t stop_at_step = -1;  // stop early, with a checkpoint, after this step (-1: run all)
  bool handle_signals = true; // SIGTERM/SIGINT/SIGUSR1: finish the step, checkpoint, return ok
  FILE* log = stdout;         // rank 0's console (nullptr: quiet)
  // Test hook, called on every rank after each step with the step number.
  std::function<void(int64_t step)> after_step;
};

struct TrainResult {
  int64_t step = 0;              // steps done in this phase
  int64_t total_steps = 0;       // the phase's schedule.total_steps
  uint64_t micro_step = 0;
  bool stopped_by_signal = false;
  std::string checkpoint;        // the last checkpoint written ("" if none)
  // The last logged window's means.
  double loss = 0, mlm_accuracy = 0, nsp_accuracy = 0;
  double first_loss = 0;         // the first logged window's mean loss
  // The last held-out evaluation (data.eval: all its sets together), each named set's
  // (evaluation.names' order; empty without names), and how many ran.
  EvalResult eval;
  std::vector<EvalResult> eval_sets;
  int evaluations = 0;
  // Seconds spent, summed over the run.
  double t_total = 0, t_data = 0, t_compute = 0, t_allreduce = 0, t_optimizer = 0,
         t_checkpoint = 0, t_logging = 0;
};

// Runs (or resumes) the phase described by `config`. REQUIRES: config validated for
// comm.world() ranks. Errors before the first step write nothing.
Status run_training(const TrainConfig& config, Communicator& comm, const TrainOptions& opts,
                    TrainResult* result);

// The shards of data.train and data.eval against the config and the model, as run_training
// checks them before it builds anything (their headers, vocabulary, shape, masking and size,
// and every held-out sample): what `train --dry-run` asks of data it can read. When the check
// passes and `opened` is given, it receives the sets as opened (eval null without data.eval),
// so that a caller describing them need not open thousands of files a second time.
struct OpenedShardSets {
  std::unique_ptr<ShardSet> train, eval;
  std::shared_ptr<const BlendSchedule> blend;  // data.weights' blend of train's sources; null without
};
Status check_training_data(const TrainConfig& config, Communicator& comm, const TrainOptions& opts,
                           OpenedShardSets* opened = nullptr);

// How data.train (training = true) and data.eval are opened for data.format: auto takes
// lansbert and HDF5 files by their magic, lbs and hdf5 only that kind. With hdf5, data.train
// keeps NVIDIA's rule (only files named *training*); data.eval takes the files it names (such
// as NVIDIA's *_test_* ones).
ShardSetOptions shard_set_options(const TrainConfig& config, bool training);

}  // namespace lansbert
