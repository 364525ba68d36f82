// ShardSink: prep's output into one directory: shard-00000.lbs, shard-00001.lbs, ... numbered
// in creation order, a new one opened when the current holds `shard_size` records.
#pragma once

#include <fmt/format.h>

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "lansbert/data/instances.h"
#include "lansbert/data/shard.h"

namespace lansbert {

class ShardSink {
 public:
  ShardSink(int64_t shard_size, std::string dir, const ShardInfo& info)
      : shard_size_(shard_size), dir_(std::move(dir)), info_(info) {}
  Status add(const Instance& inst) {
    if (writer_ && writer_->count() >= shard_size_) LB_RETURN_IF_ERROR(close());
    if (!writer_) {
      const std::string path = fmt::format("{}/shard-{:05d}.lbs", dir_, shards_);
      LB_RETURN_IF_ERROR(ShardWriter::create(path, info_, &writer_));
    }
    return writer_->add(inst);
  }
  Status close() {
    if (!writer_) return Status::ok();
    LB_RETURN_IF_ERROR(writer_->finish());
    writer_.reset();
    ++shards_;
    return Status::ok();
  }
  int64_t shards() const { return shards_ + (writer_ ? 1 : 0); }

 private:
  int64_t shard_size_;
  std::string dir_;
  ShardInfo info_;
  std::unique_ptr<ShardWriter> writer_;
  int64_t shards_ = 0;
};

// One pass of instances of documents [first, size) of `docs` (the ones before are random-B
// candidates only; document d's streams keyed by index[d]) into `sink`, through *scratch; adds
// their count to *instances and their tokens to *tokens.
inline Status write_instances(std::span<const Document> docs, std::span<const uint64_t> index, size_t first,
                              int pass, const InstanceOptions& io, const MaskingVocab& vocab, int threads,
                              ShardSink* sink, std::vector<Instance>* scratch, int64_t* instances, int64_t* tokens) {
  scratch->clear();
  create_instances(docs, index, first, pass, io, vocab, threads, scratch);
  for (const auto& inst : *scratch) {
    LB_RETURN_IF_ERROR(sink->add(inst));
    *tokens += static_cast<int64_t>(inst.tokens.size());
  }
  *instances += static_cast<int64_t>(scratch->size());
  return Status::ok();
}

}  // namespace lansbert
