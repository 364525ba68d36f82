// safetensors reading, validation, writing, and loading into the parameter table.
#include "lansbert/model/safetensors.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <nlohmann/json.hpp>

#include "lansbert/core/file_io.h"
#include "lansbert/kernels/half.h"

namespace lansbert {

namespace {

using json = nlohmann::json;

// Hugging Face's limit on the header size (100 MB) also bounds our allocation.
constexpr uint64_t kMaxHeader = 100ull << 20;

struct DtypeInfo {
  const char* name;
  StDtype dtype;
  size_t bytes;
};
constexpr DtypeInfo kDtypes[] = {
    {"F64", StDtype::kF64, 8}, {"F32", StDtype::kF32, 4}, {"F16", StDtype::kF16, 2},
    {"BF16", StDtype::kBF16, 2}, {"I64", StDtype::kI64, 8}, {"I32", StDtype::kI32, 4},
    {"I16", StDtype::kI16, 2}, {"I8", StDtype::kI8, 1}, {"U8", StDtype::kU8, 1},
    {"BOOL", StDtype::kBool, 1},
};

const DtypeInfo* dtype_by_name(const std::string& s) {
  for (const DtypeInfo& d : kDtypes)
    if (s == d.name) return &d;
  return nullptr;
}
std::string shape_string(const std::vector<int64_t>& shape) {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i) {
    if (i) s += ',';
    s += std::to_string(shape[i]);
  }
  return s + "]";
}

Status bad(const std::string& file, const std::string& what) {
  return Status::corrupt(file + ": not a valid safetensors file: " + what);
}

Status parse_tensor(const std::string& file, const std::string& name, const json& v,
                    uint64_t data_size, StTensor* t) {
  const std::string where = "tensor '" + name + "'";
  if (!v.is_object()) return bad(file, where + " is not a JSON object");
  auto dt = v.find("dtype");
  if (dt == v.end() || !dt->is_string()) return bad(file, where + " has no string 'dtype'");
  const DtypeInfo* info = dtype_by_name(dt->get<std::string>());
  if (!info) return bad(file, where + " has unknown dtype '" + dt->get<std::string>() + "'");
  t->dtype = info->dtype;
  auto sh = v.find("shape");
  if (sh == v.end() || !sh->is_array()) return bad(file, where + " has no array 'shape'");
  uint64_t numel = 1;
  for (const json& d : *sh) {
    if (!d.is_number_unsigned()) return bad(file, where + " has a shape entry that is not a non-negative integer");
    const uint64_t n = d.get<uint64_t>();
    if (n != 0 && numel > (uint64_t(1) << 62) / n) return bad(file, where + " has a shape whose size overflows");
    numel *= n;
    t->shape.push_back(static_cast<int64_t>(n));
  }
  auto off = v.find("data_offsets");
  if (off == v.end() || !off->is_array() || off->size() != 2 || !(*off)[0].is_number_unsigned() ||
      !(*off)[1].is_number_unsigned())
    return bad(file, where + " needs 'data_offsets' [begin, end] of non-negative integers");
  t->begin = (*off)[0].get<uint64_t>();
  t->end = (*off)[1].get<uint64_t>();
  if (t->begin > t->end || t->end > data_size)
    return bad(file, where + " has data_offsets [" + std::to_string(t->begin) + ", " + std::to_string(t->end) +
                         "] outside the data section of " + std::to_string(data_size) + " bytes");
  if (t->end - t->begin != numel * info->bytes)
    return bad(file, where + " spans " + std::to_string(t->end - t->begin) + " bytes but its shape and dtype need " +
                         std::to_string(numel * info->bytes));
  return Status::ok();
}

}  // namespace

Status parse_safetensors(std::string bytes, const std::string& name, SafetensorsFile* out) {
  *out = SafetensorsFile{};
  out->path = name;
  if (bytes.size() < 8) return bad(name, "file is " + std::to_string(bytes.size()) + " bytes, shorter than the 8-byte header length");
  uint64_t n = 0;
  for (int i = 7; i >= 0; --i) n = (n << 8) | static_cast<unsigned char>(bytes[i]);
  if (n > kMaxHeader) return bad(name, "header length " + std::to_string(n) + " exceeds the 100 MB limit");
  if (n > bytes.size() - 8)
    return bad(name, "header length " + std::to_string(n) + " exceeds the file size " + std::to_string(bytes.size()) + " (truncated?)");
  const uint64_t data_size = bytes.size() - 8 - n;
  json header = json::parse(bytes.begin() + 8, bytes.begin() + 8 + static_cast<std::ptrdiff_t>(n), nullptr, false);
  if (header.is_discarded()) return bad(name, "header (bytes 8.." + std::to_string(8 + n) + ") is not valid JSON");
  if (!header.is_object()) return bad(name, "header is not a JSON object");
  std::vector<std::pair<uint64_t, uint64_t>> ranges;
  for (auto it = header.begin(); it != header.end(); ++it) {
    if (it.key() == "__metadata__") {
      if (!it->is_object()) return bad(name, "__metadata__ is not an object");
      for (auto m = it->begin(); m != it->end(); ++m) {
        if (!m->is_string()) return bad(name, "__metadata__ value of '" + m.key() + "' is not a string");
        out->metadata[m.key()] = m->get<std::string>();
      }
      continue;
    }
    StTensor t;
    LB_RETURN_IF_ERROR(parse_tensor(name, it.key(), *it, data_size, &t));
    if (t.end > t.begin) ranges.emplace_back(t.begin, t.end);
    out->tensors.emplace(it.key(), std::move(t));
  }
  std::sort(ranges.begin(), ranges.end());
  for (size_t i = 1; i < ranges.size(); ++i)
    if (ranges[i].first < ranges[i - 1].second)
      return bad(name, "two tensors overlap at data byte " + std::to_string(ranges[i].first));
  out->data_start = 8 + n;
  out->bytes = std::move(bytes);
  return Status::ok();
}

Status read_safetensors(const std::string& path, SafetensorsFile* out) {
  std::string bytes;
  LB_RETURN_IF_ERROR(read_file(path, &bytes));
  return parse_safetensors(std::move(bytes), path, out);
}

namespace {
// The bytes of `n` floats as BF16 or F16, or an error naming the first finite value the
// format cannot hold.
Status encode_half(const std::string& path, const std::string& name, const float* x, size_t n, StDtype dtype,
                   std::string* out) {
  out->resize(n * 2);
  for (size_t i = 0; i < n; ++i) {
    const uint16_t h = dtype == StDtype::kBF16 ? kern::float_to_bf16(x[i]) : kern::float_to_fp16(x[i]);
    const float stored = dtype == StDtype::kBF16 ? kern::bf16_to_float(h) : kern::fp16_to_float(h);
    if (std::isfinite(x[i]) && !std::isfinite(stored))
      return Status::invalid_argument(path + ": tensor '" + name + "' element " + std::to_string(i) + " is " +
                                      std::to_string(x[i]) + ", beyond what " +
                                      (dtype == StDtype::kBF16 ? "BF16" : "F16 (at most 65504)") + " holds: not written");
    std::memcpy(out->data() + 2 * i, &h, 2);  // little-endian hosts (x86-64, aarch64)
  }
  return Status::ok();
}
}  // namespace

Status write_safetensors(const std::string& path, const ParamTable& table, const float* params,
                         const std::map<std::string, std::string>& metadata, StDtype dtype,
                         const BytesSeen& written) {
  if (dtype != StDtype::kF32 && dtype != StDtype::kBF16 && dtype != StDtype::kF16)
    return Status::invalid_argument(path + ": weights are written as F32, BF16 or F16");
  const bool half = dtype != StDtype::kF32;
  const char* dtype_name = !half ? "F32" : dtype == StDtype::kBF16 ? "BF16" : "F16";
  json header = json::object();
  if (!metadata.empty()) header["__metadata__"] = metadata;
  std::vector<std::string> halves(half ? table.entries().size() : 0);  // F32 is written from params
  uint64_t offset = 0;
  for (size_t k = 0; k < table.entries().size(); ++k) {
    const ParamEntry& e = table.entries()[k];
    if (half) LB_RETURN_IF_ERROR(encode_half(path, e.name, params + e.offset, e.numel, dtype, &halves[k]));
    const uint64_t bytes = e.numel * (half ? 2 : 4);
    header[e.name] = {{"dtype", dtype_name}, {"shape", e.shape}, {"data_offsets", {offset, offset + bytes}}};
    offset += bytes;
  }
  std::string h = header.dump();
  h.append((8 - h.size() % 8) % 8, ' ');  // align the data section to 8 bytes
  char len[8];
  uint64_t n = h.size();
  for (int i = 0; i < 8; ++i) len[i] = static_cast<char>((n >> (8 * i)) & 0xff);
  std::vector<std::string_view> parts = {std::string_view(len, 8), h};
  for (size_t k = 0; k < table.entries().size(); ++k) {
    const ParamEntry& e = table.entries()[k];
    parts.emplace_back(half ? std::string_view(halves[k])
                            : std::string_view(reinterpret_cast<const char*>(params + e.offset), e.numel * 4));
  }
  LB_RETURN_IF_ERROR(write_file_atomic(path, parts));
  if (written)
    for (std::string_view part : parts) written(part.data(), part.size());
  return Status::ok();
}

namespace {


Status copy_as_float(const SafetensorsFile& f, const std::string& name, const StTensor& t, float* dst, size_t n) {
  const char* src = f.data(t);
  switch (t.dtype) {
    case StDtype::kF32:
      std::memcpy(dst, src, n * 4);
      return Status::ok();
    case StDtype::kF64:
      for (size_t i = 0; i < n; ++i) {
        double d;
        std::memcpy(&d, src + 8 * i, 8);
        dst[i] = static_cast<float>(d);
      }
      return Status::ok();
    case StDtype::kF16:
    case StDtype::kBF16:
      for (size_t i = 0; i < n; ++i) {
        uint16_t h;
        std::memcpy(&h, src + 2 * i, 2);
        if (t.dtype == StDtype::kF16) {
          dst[i] = kern::fp16_to_float(h);
        } else {
          const uint32_t bits = uint32_t(h) << 16;
          std::memcpy(&dst[i], &bits, 4);
        }
      }
      return Status::ok();
    default:
      return Status::invalid_argument(f.path + ": tensor '" + name + "' has a non-float dtype");
  }
}

// Hugging Face names that carry no parameter of ours: tied copies and buffers.
bool is_known_extra(const std::string& name) {
  return name == "cls.predictions.decoder.weight" || name == "cls.predictions.decoder.bias" ||
         (name.size() >= 12 && name.compare(name.size() - 12, 12, "position_ids") == 0);
}

// Old checkpoints (TF conversions) name LayerNorm parameters gamma/beta.
std::string legacy_name(const std::string& name) {
  const std::string ln_w = "LayerNorm.weight", ln_b = "LayerNorm.bias";
  if (name.size() > ln_w.size() && name.compare(name.size() - ln_w.size(), ln_w.size(), ln_w) == 0)
    return name.substr(0, name.size() - 6) + "gamma";
  if (name.size() > ln_b.size() && name.compare(name.size() - ln_b.size(), ln_b.size(), ln_b) == 0)
    return name.substr(0, name.size() - 4) + "beta";
  return name;
}

}  // namespace

Status load_params(const SafetensorsFile& file, const ParamTable& table, float* params, bool allow_unexpected) {
  std::map<std::string, bool> used;
  for (const ParamEntry& e : table.entries()) {
    std::string key = e.name;
    auto it = file.tensors.find(key);
    if (it == file.tensors.end()) {
      key = legacy_name(e.name);
      it = file.tensors.find(key);
    }
    if (it == file.tensors.end()) return Status::not_found(file.path + ": missing tensor '" + e.name + "'");
    if (it->second.shape != e.shape) {
      return Status::invalid_argument(file.path + ": tensor '" + e.name + "' has shape " +
                                      shape_string(it->second.shape) + ", the model needs " + shape_string(e.shape));
    }
    LB_RETURN_IF_ERROR(copy_as_float(file, e.name, it->second, params + e.offset, e.numel));
    used[key] = true;
  }
  if (!allow_unexpected)
    for (const auto& [name, t] : file.tensors)
      if (!used.count(name) && !is_known_extra(name))
        return Status::invalid_argument(file.path + ": unexpected tensor '" + name + "' (not part of this model)");
  return Status::ok();
}

}  // namespace lansbert
