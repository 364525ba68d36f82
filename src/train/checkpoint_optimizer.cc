// A checkpoint's optimizer files: loading the state, from optimizer.state (replicated) or the
// manifest and the slice files of sharded state written on any rank count, cut to the range a
// rank holds; each file is checked against trainer.json just before it is read, so a rank
// reads and checks only what it loads. And the check of a whole checkpoint (lansbert verify).
#include <algorithm>
#include <filesystem>
#include <optional>
#include <nlohmann/json.hpp>

#include "lansbert/core/file_io.h"
#include "lansbert/train/checkpoint.h"

namespace lansbert {
namespace fs = std::filesystem;
namespace {

// One slice of sharded state as the manifest lists it: flat elements [begin, end) in `file`.
struct Slice {
  size_t begin, end;
  std::string file;
};

// Reads DIR/optimizer.manifest.json (already verified): slices that tile [0, elements), or
// [0, the manifest's own element count) when `elements` is not given.
Status read_manifest(const std::string& dir, std::optional<size_t> given, std::vector<Slice>* slices) {
  const std::string path = (fs::path(dir) / checkpoint_file::kManifest).string();
  std::string text;
  LB_RETURN_IF_ERROR(read_file(path, &text));
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

Status load_replicated(const std::string& dir, const CheckpointMeta& meta, size_t elements, size_t begin,
                       size_t end, OptimizerState* state, float* m, float* v) {
  LB_RETURN_IF_ERROR(verify_checkpoint_file(dir, meta, checkpoint_file::kOptimizer));
  const std::string path = (fs::path(dir) / checkpoint_file::kOptimizer).string();
  if (begin == 0 && end == elements) return load_state(path, state, m, v, elements);
  std::vector<float> fm(elements), fv(elements);
  LB_RETURN_IF_ERROR(load_state(path, state, fm.data(), fv.data(), elements));
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
    if (name != checkpoint_file::kModel)  // read_checkpoint_meta checked it
      LB_RETURN_IF_ERROR(verify_checkpoint_file(dir, meta, name));
    ++inv.files;
    inv.bytes += digest.bytes;
  }
  // The optimizer state must be there, whole: optimizer.state, or a manifest whose slices
  // tile the buffer and are each listed (and so were checked above).
  if (meta.files.count(checkpoint_file::kManifest)) {
    std::vector<Slice> slices;
    LB_RETURN_IF_ERROR(read_manifest(dir, std::nullopt, &slices));
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
  LB_RETURN_IF_ERROR(verify_checkpoint_file(dir, meta, checkpoint_file::kManifest));
  std::vector<Slice> slices;
  LB_RETURN_IF_ERROR(read_manifest(dir, elements, &slices));
  // Each slice read is loaded whole and cut; the scalars come from the first.
  std::vector<float> sm, sv;
  bool have_state = false;
  for (const Slice* p : slices_to_read(slices, begin, end)) {
    LB_RETURN_IF_ERROR(verify_checkpoint_file(dir, meta, p->file));
    sm.resize(p->end - p->begin);
    sv.resize(p->end - p->begin);
    OptimizerState st;
    LB_RETURN_IF_ERROR(load_state((fs::path(dir) / p->file).string(), &st, sm.data(), sv.data(), p->end - p->begin));
    if (!have_state) *state = st;
    have_state = true;
    const size_t lo = std::max(begin, p->begin), hi = std::min(end, p->end);
    if (lo >= hi) continue;
    std::copy(sm.begin() + (lo - p->begin), sm.begin() + (hi - p->begin), m + (lo - begin));
    std::copy(sv.begin() + (lo - p->begin), sv.begin() + (hi - p->begin), v + (lo - begin));
  }
  return Status::ok();
}

}  // namespace lansbert
