// safetensors (Hugging Face's tensor file format): an 8-byte little-endian header length,
// a JSON header mapping names to {dtype, shape, data_offsets} plus optional string
// "__metadata__", then the raw little-endian data. The parser is bounds-checked: any
// malformed or hostile file is a Status naming the file and what is wrong, never a crash
// or an out-of-bounds read.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "lansbert/core/file_io.h"
#include "lansbert/core/status.h"
#include "lansbert/model/param_table.h"

namespace lansbert {

enum class StDtype { kF64, kF32, kF16, kBF16, kI64, kI32, kI16, kI8, kU8, kBool };

struct StTensor {
  StDtype dtype = StDtype::kF32;
  std::vector<int64_t> shape;
  uint64_t begin = 0, end = 0;  // byte range within the data section
};

struct SafetensorsFile {
  std::string path;
  std::map<std::string, StTensor> tensors;
  std::map<std::string, std::string> metadata;
  std::string bytes;        // the whole file
  size_t data_start = 0;    // 8 + header length
  const char* data(const StTensor& t) const { return bytes.data() + data_start + t.begin; }
};

// Parses and validates `path` (header, dtypes, shapes, offsets inside the data, no overlaps).
Status read_safetensors(const std::string& path, SafetensorsFile* out);
// The same over bytes already in memory; `name` is used in messages.
Status parse_safetensors(std::string bytes, const std::string& name, SafetensorsFile* out);

// Writes every tensor of `table` from the host fp32 buffer `params`, atomically, as `dtype`:
// F32, or BF16 / F16 rounded to nearest, ties to even (kernels/half.h). A finite value that
// rounds to infinity (F16: beyond 65504) is an error naming the tensor and element: an
// export must not turn weights into infinities unnoticed. NaN and infinities are kept.
// `written`, when given, is handed the file's bytes in order (a checkpoint takes its CRC32C
// there instead of reading the file back); the file is whole once this returns ok.
Status write_safetensors(const std::string& path, const ParamTable& table, const float* params,
                         const std::map<std::string, std::string>& metadata, StDtype dtype = StDtype::kF32,
                         const BytesSeen& written = {});

// Copies the tensors of `file` into `params` by name, converting F32/F16/BF16/F64 to fp32.
// Every table entry must be present with its exact shape; a name not in the table is an
// error unless it is a known alias of a tied or non-parameter tensor of Hugging Face
// checkpoints (cls.predictions.decoder.weight/bias, *.position_ids) or
// `allow_unexpected` is set. Old-style LayerNorm.gamma/beta names are accepted.
Status load_params(const SafetensorsFile& file, const ParamTable& table, float* params,
                   bool allow_unexpected = false);

}  // namespace lansbert
