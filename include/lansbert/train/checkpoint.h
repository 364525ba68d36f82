// Checkpoints: one directory per checkpoint under the run's checkpoint root,
//   ROOT/step-000000123/{model.safetensors, optimizer.state, trainer.json}
// written under a temporary name (ROOT/.tmp-step-...-PID), fsynced, renamed into place, the
// root fsynced, and only then the `latest` symlink replaced atomically (symlink to a temp
// name + rename). A crash at any point leaves the previous checkpoint and pointer intact;
// stale temporary directories are never read. trainer.json holds the counters, the data
// position, the resolved config and the size and CRC32C of the other two files, so a
// flipped byte anywhere is a clear "corrupt" error naming the file.
#pragma once

#include <cstdint>
#include <string>

#include "lansbert/core/status.h"
#include "lansbert/data/sampler.h"
#include "lansbert/model/param_table.h"
#include "lansbert/optim/updater.h"

namespace lansbert {

inline constexpr int kCheckpointFormatVersion = 1;

struct CheckpointMeta {
  int64_t step = 0;         // global batches done in this phase
  uint64_t micro_step = 0;  // micro-steps done over the whole run (dropout keys)
  DataPosition data;        // where the next global batch starts
  uint64_t seed = 0;
  int world = 1;
  std::string config_json;  // the resolved config (train_config.h config_to_json)
  OptimizerState optimizer;
};

// Writes a checkpoint of `meta` with params and moments (host fp32, table layout) under
// root, points `latest` (and `final` when `final`) at it and removes all but the newest
// `keep_last` step-* directories. *written receives the checkpoint's directory.
Status write_checkpoint(const std::string& root, const CheckpointMeta& meta,
                        const ParamTable& table, const float* params, const float* m,
                        const float* v, int keep_last, bool final, std::string* written);

// `spec` is a checkpoint directory (holding trainer.json), or a root / pointer whose
// `latest` leads to one. Fails (not found) when there is none.
Status resolve_checkpoint(const std::string& spec, std::string* dir);

// Reads trainer.json and checks the format version and every file's size and CRC32C.
Status read_checkpoint_meta(const std::string& dir, CheckpointMeta* meta);

// Loads model.safetensors of a checkpoint (or of a Hugging Face directory) into params.
Status load_checkpoint_params(const std::string& dir, const ParamTable& table, float* params);
// Loads optimizer.state into state, m and v.
Status load_checkpoint_optimizer(const std::string& dir, size_t elements, OptimizerState* state,
                                 float* m, float* v);

}  // namespace lansbert
