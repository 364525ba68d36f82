// DataParallel: the trainer's gradient reduction and update over the ranks of a communicator,
// per the config's distributed section.
//   replicated (shard_optimizer: false): GradSync buckets of distributed.bucket_mb, whose
//     all-reduces (average) start from the model's backward hook on the last micro-step of
//     each global batch and overlap the rest of backward; every rank then runs the same
//     Updater step over the whole buffer with full-size m and v.
//   sharded (shard_optimizer: true): ZeRO-1 via ShardedStep: the gradients reduced to the
//     ranks that own them, the update of this rank's slice with slice-sized m and v
//     (cross-rank block norms), all-gather of the parameters. On several ranks in the
//     library's order the reduction is GradSync with to_owners: each bucket's parts are
//     reduced to their owners (MPI_Ireduce / ncclReduce) from the backward hook, overlapping
//     backward as the replicated buckets do; with reduction_order: fixed it is ShardedStep's
//     reduce-scatter after backward (rank-ordered sums, no overlap).
// On one rank both reduce to the single-process update (the reductions are identities).
// It also writes checkpoints collectively (the sharded layout of checkpoint.h when sharded,
// rank 0 alone otherwise) and loads this rank's part of the moments from either layout.
// Two communicators: `comm` for host scalars (the optimizer's norm sums, checkpoint
// agreement), `buffers` for the collectives over the flat buffers (the same MPI communicator
// on the CPU; NCCL over device buffers with backend: cuda).
#pragma once

#include <cstddef>
#include <functional>
#include <memory>
#include <string>

#include "lansbert/core/status.h"
#include "lansbert/dist/communicator.h"
#include "lansbert/dist/grad_sync.h"
#include "lansbert/dist/sharded_step.h"
#include "lansbert/model/param_table.h"
#include "lansbert/optim/updater.h"
#include "lansbert/train/checkpoint.h"
#include "lansbert/train/train_config.h"

namespace lansbert {

class DataParallel {
 public:
  // Sharded mode installs the shard on `updater`. REQUIRES: table, grads (total_elements
  // floats, from `memory`), both communicators, updater and memory outlive this object.
  DataParallel(const DistributedSection& cfg, const ParamTable& table, float* grads,
               Communicator& comm, Communicator& buffers, Updater& updater,
               Allocator& memory = host_allocator());
  // Host buffers: one communicator for both.
  DataParallel(const DistributedSection& cfg, const ParamTable& table, float* grads,
               Communicator& comm, Updater& updater)
      : DataParallel(cfg, table, grads, comm, comm, updater) {}

  bool sharded() const { return static_cast<bool>(sharded_); }
  // The flat elements whose moments this rank holds: [0, N) replicated, its slice sharded.
  size_t state_begin() const { return sharded_ ? sharded_->shard_begin() : 0; }
  size_t state_end() const { return sharded_ ? sharded_->shard_end() : table_.total_elements(); }
  size_t state_elements() const { return state_end() - state_begin(); }

  // Call before each micro-step's backward; `last` on the global batch's last micro-step.
  void begin_micro_step(bool last);
  // Pass to BertModel::backward (empty when nothing overlaps: overlap_reduction false, or
  // sharded in fixed order).
  std::function<void(size_t, size_t)> backward_hook();
  // After the last micro-step's backward: reduces the gradients and applies the update
  // (buf.m/v hold state_elements() floats). *reduce_s receives the seconds spent waiting on
  // gradient reduction that backward did not hide (sharded with fixed order: the
  // reduce-scatter and all-gather are inside the step and are counted as optimizer time,
  // *reduce_s = 0; the all-gather is always optimizer time).
  // With device buffers the reduction is waited for here, so it is in *reduce_s too.
  Status step(const FlatBuffers& buf, StepReport* report, double* reduce_s);

  // Collective: every rank calls it with the same meta. Writes the checkpoint; *written
  // gets its directory on every rank. Fails on every rank when any rank failed.
  Status save(const std::string& root, const CheckpointMeta& meta, const float* params,
              const float* m, const float* v, int keep_last, bool final, std::string* written);
  // This rank's moments [state_begin, state_end) and the scalars, from a checkpoint of
  // either layout written on any rank count (meta: read_checkpoint_meta of dir); only the
  // files this rank's range needs are read and checked.
  Status load_optimizer(const std::string& dir, const CheckpointMeta& meta, OptimizerState* state, float* m,
                        float* v) const;

 private:
  // Max over ranks of "failed"; returns st, or an error when another rank failed.
  Status agree(const Status& st, const char* what);

  const ParamTable& table_;
  Communicator& comm_;
  Updater& updater_;
  std::unique_ptr<GradSync> sync_;
  std::unique_ptr<ShardedStep> sharded_;
  float* grads_;
  bool overlap_ = true;  // distributed.overlap_reduction
};

// distributed.reduction_order as the dist layer's ReductionOrder (fast: kNative, fixed:
// kFixedOrder). REQUIRES: validated.
ReductionOrder reduction_order(const DistributedSection& cfg);

}  // namespace lansbert
