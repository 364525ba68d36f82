// DataParallel: GradSync or ShardedStep around the Updater, and collective checkpoints.
#include "lansbert/train/data_parallel.h"

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <vector>

#include "lansbert/train/device_ranks.h"
#include "lansbert/train/rank_agreement.h"

namespace lansbert {
namespace {
double now_s() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}
}  // namespace

ReductionOrder reduction_order(const DistributedSection& cfg) {
  return cfg.reduction_order == "fixed" ? ReductionOrder::kFixedOrder : ReductionOrder::kNative;
}

DataParallel::DataParallel(const DistributedSection& cfg, const ParamTable& table, float* grads,
                           Communicator& comm, Communicator& buffers, Updater& updater,
                           Allocator& memory)
    : table_(table), comm_(comm), updater_(updater), grads_(grads) {
  GradWire wire;
  LB_CHECK_MSG(parse_grad_wire(cfg.grad_reduce_dtype, &wire),
               "distributed.grad_reduce_dtype not validated: " + cfg.grad_reduce_dtype);
  // Sharded on several ranks (library order): the buckets are reduced to their owners while
  // backward runs, and ShardedStep only updates and gathers.
  const bool overlapped_shards = cfg.shard_optimizer && cfg.overlap_reduction && buffers.world() > 1 &&
                                 reduction_order(cfg) == ReductionOrder::kNative;
  overlap_ = cfg.overlap_reduction;
  if (cfg.shard_optimizer)
    sharded_ = std::make_unique<ShardedStep>(table, buffers, comm, updater, memory, wire, overlapped_shards);
  if (!cfg.shard_optimizer || overlapped_shards) {
    GradSyncOptions o;
    o.bucket_bytes = std::max<size_t>(size_t(cfg.bucket_mb * double(1 << 20)), sizeof(float));
    o.op = ReduceOp::kAvg;
    o.wire = wire;
    o.to_owners = overlapped_shards;
    sync_ = std::make_unique<GradSync>(table, grads, buffers, o, memory);
  }
}

void DataParallel::begin_micro_step(bool last) {
  if (sync_) sync_->begin(last);
}

std::function<void(size_t, size_t)> DataParallel::backward_hook() {
  if (!sync_ || !overlap_) return {};  // finish() then reduces every bucket
  return sync_->hook();
}

Status DataParallel::step(const FlatBuffers& buf, StepReport* report, double* reduce_s) {
  *reduce_s = 0;
  if (sync_) {
    const double t0 = now_s();
    sync_->finish();
    *reduce_s = now_s() - t0;
  }
  if (sharded_) return sharded_->step(buf.params, buf.grads, buf.m, buf.v, report);
  return updater_.step(table_, buf, report);
}

Status DataParallel::agree(const Status& st, const char* what) {
  return agree_across_ranks(comm_, st, std::string("checkpoint: ") + what, &Status::io_error);
}

Status DataParallel::save(const std::string& root, const CheckpointMeta& meta, const float* params,
                          const float* m, const float* v, int keep_last, bool final,
                          std::string* written) {
  const bool rank0 = comm_.rank() == 0;
  if (!sharded_) {
    Status st;
    if (rank0) st = write_checkpoint(root, meta, table_, params, m, v, keep_last, final, written);
    LB_RETURN_IF_ERROR(agree(st, "writing on rank 0"));
    *written = checkpoint_step_dir(root, meta.step);  // every rank: the loop's control flow uses it
    return Status::ok();
  }
  // 1. Rank 0 makes the temporary directory; its pid names it for every rank.
  double tag = rank0 ? double(::getpid()) : 0;
  comm_.all_reduce(&tag, 1, ReduceOp::kMax);
  const std::string tmp = checkpoint_tmp_dir(root, meta.step, int64_t(tag));
  LB_RETURN_IF_ERROR(agree(rank0 ? create_checkpoint_tmp(root, tmp) : Status::ok(), "creating the temporary directory"));
  // 2. Every rank writes and fsyncs its slice; the collective is the barrier after which
  // every part is on disk. On any rank's failure rank 0 removes the partial directory.
  OptimizerSlice mine;
  Status mine_written = write_optimizer_slice(tmp, comm_.rank(), meta.optimizer, m, v, state_begin(), state_end(),
                                              &mine);
  std::error_code ec;
  if (!mine_written.is_ok() && !rank0 && !std::filesystem::is_directory(tmp, ec))
    mine_written = Status::with_code(mine_written.code(), mine_written.message() + " (rank 0 made " + tmp +
                                                   ", which this rank does not see: checkpoint.dir must be one "
                                                   "directory shared by every rank's host)");
  Status written_slice = agree(mine_written, "writing an optimizer slice");
  if (!written_slice.is_ok()) {
    if (rank0) remove_checkpoint_tmp(tmp);
    return written_slice;
  }
  // 3. Rank 0 commits: manifest, model, trainer.json, rename, `latest`. Each slice's range
  // and the digest its rank took travel as doubles (exact: sizes below 2^53, 32-bit CRCs).
  const int W = comm_.world();
  std::vector<double> slice_facts(4 * size_t(W), 0.0);
  double* my_facts = &slice_facts[4 * size_t(comm_.rank())];
  my_facts[0] = double(mine.begin);
  my_facts[1] = double(mine.end);
  my_facts[2] = double(mine.digest.bytes);
  my_facts[3] = double(mine.digest.crc32c);
  comm_.all_reduce(slice_facts.data(), slice_facts.size(), ReduceOp::kSum);
  Status st;
  if (rank0) {
    std::vector<OptimizerSlice> slices(W);
    for (int r = 0; r < W; ++r) {
      const double* f = &slice_facts[4 * size_t(r)];
      slices[r] = {size_t(f[0]), size_t(f[1]), optimizer_slice_file(r), {uint64_t(f[2]), uint32_t(f[3])}};
    }
    st = commit_sharded_checkpoint(root, tmp, meta, table_, params, slices, keep_last, final, written);
    if (!st.is_ok()) remove_checkpoint_tmp(tmp);
  }
  LB_RETURN_IF_ERROR(agree(st, "committing on rank 0"));
  *written = checkpoint_step_dir(root, meta.step);
  return Status::ok();
}

Status DataParallel::load_optimizer(const std::string& dir, const CheckpointMeta& meta, OptimizerState* state,
                                    float* m, float* v) const {
  const size_t elements = table_.total_elements();
  // Sharded, each rank reads the slices that overlap its own range.
  if (sharded_ || comm_.world() == 1)
    return load_checkpoint_optimizer_range(dir, meta, elements, state_begin(), state_end(), state, m, v);
  // Replicated, every rank holds the same moments: rank 0 reads them for all, as it does the
  // weights (bert-large's 2.7 GB read once, not once a node).
  Status st;
  if (comm_.rank() == 0) st = load_checkpoint_optimizer(dir, meta, elements, state, m, v);
  LB_RETURN_IF_ERROR(agree_across_ranks(comm_, st, "loading the optimizer state on rank 0", nullptr));
  std::string scalars = comm_.rank() == 0 ? state_to_json(*state) : std::string();
  broadcast_text(comm_, &scalars);
  if (comm_.rank() != 0) LB_RETURN_IF_ERROR(state_from_json(scalars, state));
  comm_.broadcast(m, elements * sizeof(float), 0);
  comm_.broadcast(v, elements * sizeof(float), 0);
  return Status::ok();
}

}  // namespace lansbert
