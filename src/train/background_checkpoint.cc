// BackgroundCheckpoint (background_checkpoint.h).
#include "background_checkpoint.h"

#include <utility>

namespace lansbert {

BackgroundCheckpoint::BackgroundCheckpoint(std::string root, CheckpointMeta meta, const ParamTable& table,
                                           std::vector<float> params, std::vector<float> m, std::vector<float> v,
                                           int keep_last)
    : thread_([this, root = std::move(root), meta = std::move(meta), &table, params = std::move(params),
               m = std::move(m), v = std::move(v), keep_last] {
        std::string written;
        status_ = write_checkpoint(root, meta, table, params.data(), m.data(), v.data(), keep_last, /*final=*/false,
                                   &written);
        finished_.store(true, std::memory_order_release);
      }) {}

BackgroundCheckpoint::~BackgroundCheckpoint() {
  if (thread_.joinable()) thread_.join();
}

Status BackgroundCheckpoint::wait() {
  if (thread_.joinable()) thread_.join();
  return status_;
}

}  // namespace lansbert
