// ShardSink: prep's output into one directory: shard-00000.lbs, shard-00001.lbs, ... numbered
// in creation order, a new one opened when the current holds `shard_size` records.
#pragma once

#include <fmt/format.h>

#include <cstdint>
#include <memory>
#include <string>

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

}  // namespace lansbert
