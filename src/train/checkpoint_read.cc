// Reading a checkpoint's files. Each file a reader loads is checked against trainer.json on
// the one read that loads it: its size before, its CRC32C over the bytes the loader is handed.
// The optimizer state comes from optimizer.state (replicated) or from the manifest and the
// slice files of sharded state written on any rank count, cut to the range a rank holds, so a
// rank reads and checks only what it loads. And the check of a whole checkpoint (lansbert
// verify), which reads every file.
#include <algorithm>
#include <filesystem>
#include <optional>
#include <nlohmann/json.hpp>

#include "lansbert/core/file_io.h"
#include "lansbert/core/crc32c.h"
#include "lansbert/model/safetensors.h"
#include "lansbert/train/checkpoint.h"

namespace lansbert {
namespace fs = std::filesystem;
namespace {

std::string meta_path(const std::string& dir) { return (fs::path(dir) / checkpoint_file::kMeta).string(); }

Status not_listed(const std::string& dir, const std::string& name) {
  return Status::corrupt((fs::path(dir) / name).string() + ": not listed in " + meta_path(dir) +
                         ", so it cannot be checked (the checkpoint was altered)");
}

Status differs(const std::string& dir, const std::string& name) {
  return Status::corrupt((fs::path(dir) / name).string() + ": size or CRC32C differs from " + meta_path(dir) +
                         " (the file is damaged or was replaced)");
}

// In pieces of 8 MiB: the optimizer state of bert-large is 2.7 GB, and eight ranks of a node
// each holding a copy just to checksum it would be 21 GB of host memory.
Status file_digest(const std::string& path, FileDigest* out) {
  FileDigest d;
  const BytesSeen add = digest_into(&d);
  size_t bytes = 0;
  LB_RETURN_IF_ERROR(read_file_in_chunks(path, size_t(8) << 20, [&](const char* p, size_t n) { add(p, n); }, &bytes));
  *out = d;
  return Status::ok();
}

// Loads DIR/name with `load`, which reads the file once front to back and hands what it reads
// to the BytesSeen it is given: the file's size is checked against trainer.json first (a
// cheap stat), its CRC32C over those bytes after. A load that fails on a damaged file, or
// reads bytes that differ, is reported as the damage (the whole file is then read again for
// the check, on this failure path only), not as the parse error the damage led to.
Status load_checked(const std::string& dir, const CheckpointMeta& meta, const std::string& name,
                    const std::function<Status(const BytesSeen&)>& load) {
  const auto want = meta.files.find(name);
  if (want == meta.files.end()) return not_listed(dir, name);
  const fs::path path = fs::path(dir) / name;
  std::error_code ec;
  const uintmax_t size = fs::file_size(path, ec);
  if (ec)
    return ec == std::errc::no_such_file_or_directory ? Status::not_found(path.string() + ": no such file")
                                                      : Status::io_error(path.string() + ": " + ec.message());
  if (size != want->second.bytes) return differs(dir, name);
  FileDigest got;
  const Status st = load(digest_into(&got));
  if (st.is_ok() && got.bytes == want->second.bytes && got.crc32c == want->second.crc32c) return Status::ok();
  LB_RETURN_IF_ERROR(verify_checkpoint_file(dir, meta, name));
  return st.is_ok() ? differs(dir, name) : st;  // changed between the two reads, or a bug of the loader
}

// One slice of sharded state as the manifest lists it: flat elements [begin, end) in `file`.
struct Slice {
  size_t begin, end;
  std::string file;
};

// Reads DIR/optimizer.manifest.json, checked against `meta` on that read: slices that tile
// [0, elements), or [0, the manifest's own element count) when `elements` is not given.
Status read_manifest(const std::string& dir, const CheckpointMeta& meta, std::optional<size_t> given,
                     std::vector<Slice>* slices) {
  const std::string path = (fs::path(dir) / checkpoint_file::kManifest).string();
  std::string text;
  LB_RETURN_IF_ERROR(load_checked(dir, meta, checkpoint_file::kManifest, [&](const BytesSeen& seen) {
    LB_RETURN_IF_ERROR(read_file(path, &text));
    seen(text.data(), text.size());
    return Status::ok();
  }));
  try {
    const nlohmann::json j = nlohmann::json::parse(text);
    if (j.value("format", "") != "lansbert-optimizer-slices")
      return Status::corrupt(path + ": not a lansbert optimizer manifest");
    const size_t elements = given.value_or(j.at("elements").get<size_t>());
    if (j.at("elements").get<size_t>() != elements)
      return Status::corrupt(path + ": " + j.at("elements").dump() + " optimizer elements, the model has " +
                             std::to_string(elements));
    size_t next = 0;
    for (const auto& s : j.at("slices")) {
      Slice p{s.at("begin").get<size_t>(), s.at("end").get<size_t>(), s.at("file").get<std::string>()};
      if (p.begin != next || p.end < p.begin || p.file.find('/') != std::string::npos)
        return Status::corrupt(path + ": slices do not tile the buffer");
      next = p.end;
      slices->push_back(std::move(p));
    }
    if (next != elements || slices->empty()) return Status::corrupt(path + ": slices do not cover the buffer");
  } catch (const nlohmann::json::exception& e) {
    return Status::corrupt(path + ": malformed: " + e.what());
  }
  return Status::ok();
}

// The slices a load of [begin, end) reads: those that overlap it. An empty range (a rank
// with no elements) still needs the scalars, which every slice holds: the first non-empty
// slice then.
std::vector<const Slice*> slices_to_read(const std::vector<Slice>& slices, size_t begin, size_t end) {
  std::vector<const Slice*> out;
  for (const Slice& s : slices)
    if (s.begin < end && begin < s.end) out.push_back(&s);
  if (out.empty())
    for (const Slice& s : slices)
      if (s.end > s.begin) return {&s};
  return out;
}

// Loads DIR/name, a state file of `elements` moments each, checked on its one read.
Status load_state_checked(const std::string& dir, const CheckpointMeta& meta, const std::string& name,
                          OptimizerState* state, float* m, float* v, size_t elements) {
  const std::string path = (fs::path(dir) / name).string();
  return load_checked(dir, meta, name,
                      [&](const BytesSeen& seen) { return load_state(path, state, m, v, elements, seen); });
}

Status load_replicated(const std::string& dir, const CheckpointMeta& meta, size_t elements, size_t begin,
                       size_t end, OptimizerState* state, float* m, float* v) {
  const char* name = checkpoint_file::kOptimizer;
  if (begin == 0 && end == elements) return load_state_checked(dir, meta, name, state, m, v, elements);
  std::vector<float> fm(elements), fv(elements);
  LB_RETURN_IF_ERROR(load_state_checked(dir, meta, name, state, fm.data(), fv.data(), elements));
  std::copy(fm.begin() + begin, fm.begin() + end, m);
  std::copy(fv.begin() + begin, fv.begin() + end, v);
  return Status::ok();
}

}  // namespace

Status verify_whole_checkpoint(const std::string& dir, CheckpointInventory* out) {
  CheckpointMeta meta;
  LB_RETURN_IF_ERROR(read_checkpoint_meta(dir, &meta));
  CheckpointInventory inv;
  inv.step = meta.step;
  inv.world = meta.world;
  for (const auto& [name, digest] : meta.files) {
    LB_RETURN_IF_ERROR(verify_checkpoint_file(dir, meta, name));
    ++inv.files;
    inv.bytes += digest.bytes;
  }
  // The optimizer state must be there, whole: optimizer.state, or a manifest whose slices
  // tile the buffer and are each listed (and so were checked above).
  if (meta.files.count(checkpoint_file::kManifest)) {
    std::vector<Slice> slices;
    LB_RETURN_IF_ERROR(read_manifest(dir, meta, std::nullopt, &slices));
    for (const Slice& s : slices)
      if (!meta.files.count(s.file)) LB_RETURN_IF_ERROR(verify_checkpoint_file(dir, meta, s.file));
    inv.slices = int(slices.size());
  } else if (!meta.files.count(checkpoint_file::kOptimizer)) {
    LB_RETURN_IF_ERROR(verify_checkpoint_file(dir, meta, checkpoint_file::kOptimizer));  // names what is missing
  }
  *out = inv;
  return Status::ok();
}

Status load_checkpoint_optimizer(const std::string& dir, const CheckpointMeta& meta, size_t elements,
                                 OptimizerState* state, float* m, float* v) {
  return load_checkpoint_optimizer_range(dir, meta, elements, 0, elements, state, m, v);
}

Status load_checkpoint_optimizer_range(const std::string& dir, const CheckpointMeta& meta, size_t elements,
                                       size_t begin, size_t end, OptimizerState* state, float* m, float* v) {
  if (begin > end || end > elements) return Status::internal("optimizer range out of bounds");
  // trainer.json says which layout was written: a manifest it does not list is not read.
  if (!meta.files.count(checkpoint_file::kManifest)) return load_replicated(dir, meta, elements, begin, end, state, m, v);
  std::vector<Slice> slices;
  LB_RETURN_IF_ERROR(read_manifest(dir, meta, elements, &slices));
  // Each slice read is loaded whole and cut; the scalars come from the first.
  std::vector<float> sm, sv;
  bool have_state = false;
  for (const Slice* p : slices_to_read(slices, begin, end)) {
    sm.resize(p->end - p->begin);
    sv.resize(p->end - p->begin);
    OptimizerState st;
    LB_RETURN_IF_ERROR(load_state_checked(dir, meta, p->file, &st, sm.data(), sv.data(), p->end - p->begin));
    if (!have_state) *state = st;
    have_state = true;
    const size_t lo = std::max(begin, p->begin), hi = std::min(end, p->end);
    if (lo >= hi) continue;
    std::copy(sm.begin() + (lo - p->begin), sm.begin() + (hi - p->begin), m + (lo - begin));
    std::copy(sv.begin() + (lo - p->begin), sv.begin() + (hi - p->begin), v + (lo - begin));
  }
  return Status::ok();
}

Status verify_checkpoint_file(const std::string& dir, const CheckpointMeta& meta, const std::string& name) {
  const auto want = meta.files.find(name);
  if (want == meta.files.end()) return not_listed(dir, name);
  FileDigest got;
  LB_RETURN_IF_ERROR(file_digest((fs::path(dir) / name).string(), &got));
  if (got.bytes != want->second.bytes || got.crc32c != want->second.crc32c) return differs(dir, name);
  return Status::ok();
}

Status load_checkpoint_params(const std::string& dir, const CheckpointMeta& meta, const ParamTable& table,
                              float* params) {
  const std::string path = (fs::path(dir) / checkpoint_file::kModel).string();
  SafetensorsFile file;
  LB_RETURN_IF_ERROR(load_checked(dir, meta, checkpoint_file::kModel, [&](const BytesSeen& seen) {
    std::string bytes;
    LB_RETURN_IF_ERROR(read_file(path, &bytes));
    seen(bytes.data(), bytes.size());
    return parse_safetensors(std::move(bytes), path, &file);
  }));
  return load_params(file, table, params);
}

Status load_hf_params(const std::string& dir, const ParamTable& table, float* params) {
  SafetensorsFile file;
  LB_RETURN_IF_ERROR(read_safetensors((fs::path(dir) / checkpoint_file::kModel).string(), &file));
  return load_params(file, table, params);
}

}  // namespace lansbert
