// The YAML front end of TrainConfig: a schema of every key path with its type, a loader
// that walks the file and rejects unknown keys, wrong types and impossible values with
// "FILE:LINE:COL: key.path: what was expected", `--set key.path=value` overrides typed by
// the same schema, and the cross-field validation of TrainConfig::validate mapped back to
// the line of the key at fault. This is the only layer that includes yaml-cpp.
#pragma once

#include <string>
#include <vector>

#include "lansbert/core/status.h"
#include "lansbert/train/train_config.h"

namespace lansbert {

// Reads `path`, applies `overrides` ("key.path=value", in order) and validates for a run on
// `world` ranks. Nothing is written anywhere.
Status load_train_config(const std::string& path, const std::vector<std::string>& overrides,
                         int world, TrainConfig* out);
// The same over text already in memory; `name` stands for the file in messages. JSON (the
// config a checkpoint stores) is YAML, so checkpoints are read back with the same schema.
Status parse_train_config(const std::string& text, const std::string& name,
                          const std::vector<std::string>& overrides, int world, TrainConfig* out);
// Every key path the schema knows, for help and tests.
std::vector<std::string> train_config_keys();

}  // namespace lansbert
