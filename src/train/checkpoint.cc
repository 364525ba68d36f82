// Checkpoint writing (temp dir, fsync, rename, pointer swap, pruning) and reading (pointer
// resolution, trainer.json, checksums). See checkpoint.h for the layout and the guarantees.
#include "lansbert/train/checkpoint.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <charconv>
#include <cstdio>
#include <filesystem>
#include <stdexcept>
#include <string_view>
#include <nlohmann/json.hpp>

#include "lansbert/core/byte_text.h"
#include "lansbert/core/file_io.h"
#include "lansbert/core/json_reason.h"
#include "lansbert/core/crc32c.h"
#include "lansbert/model/safetensors.h"

namespace lansbert {
namespace fs = std::filesystem;
namespace {

using checkpoint_file::kManifest;
using checkpoint_file::kMeta;
using checkpoint_file::kModel;
using checkpoint_file::kOptimizer;

std::string step_name(int64_t step) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "step-%09lld", static_cast<long long>(step));
  return buf;
}

Status fsync_path(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY);
  if (fd < 0) return Status::io_error(path + ": cannot open to fsync");
  const int rc = ::fsync(fd);
  ::close(fd);
  return rc == 0 ? Status::ok() : Status::io_error(path + ": fsync failed");
}

// Replaces the symlink root/name with one to `target` atomically.
Status point(const std::string& root, const std::string& name, const std::string& target) {
  const fs::path tmp = fs::path(root) / ("." + name + ".tmp-" + std::to_string(::getpid()));
  std::error_code ec;
  fs::remove(tmp, ec);
  fs::create_directory_symlink(target, tmp, ec);
  if (ec) return Status::io_error(tmp.string() + ": " + ec.message());
  fs::rename(tmp, fs::path(root) / name, ec);
  if (ec) return Status::io_error((fs::path(root) / name).string() + ": " + ec.message());
  return fsync_directory(root);
}

// The names of root's step-* checkpoint directories (not the latest/final links), oldest
// first (step_name pads the number, so names sort as steps do). The error_code forms
// throughout: a file system's error mid-listing (a network file system's) ends the list there
// instead of escaping as an exception, and an entry that cannot be examined is left out.
std::vector<std::string> step_dirs(const std::string& root) {
  std::vector<std::string> steps;
  std::error_code ec;
  for (fs::directory_iterator it(root, ec), end; !ec && it != end; it.increment(ec)) {
    const std::string n = it->path().filename().string();
    std::error_code dir_ec, link_ec;
    if (n.rfind("step-", 0) == 0 && it->is_directory(dir_ec) && !it->is_symlink(link_ec) && !dir_ec && !link_ec)
      steps.push_back(n);
  }
  std::sort(steps.begin(), steps.end());
  return steps;
}

void prune(const std::string& root, int keep_last, const std::string& keep) {
  const std::vector<std::string> steps = step_dirs(root);
  std::error_code ec;
  for (size_t i = 0; i + keep_last < steps.size(); ++i)
    if (steps[i] != keep) fs::remove_all(fs::path(root) / steps[i], ec);
}

// trainer.json holds the size and CRC32C of every other file, and its own CRC32C as its last
// field: over the text it has without that field (the JSON up to its last value, then
// "\n}\n"), so the check works on the bytes and needs no re-serialisation. A hand edit or a
// flipped bit is then a clear error instead of a resume from a wrong step or data position.
constexpr std::string_view kChecksumField = ",\n  \"checksum\": \"crc32c:";

std::string with_own_checksum(const std::string& json) {  // json ends with "\n}\n"
  const std::string body = json.substr(0, json.size() - 3);
  char crc[16];
  std::snprintf(crc, sizeof crc, "%08x", crc32c(json.data(), json.size()));
  return body + std::string(kChecksumField) + crc + "\"\n}\n";
}

// Verifies the checksum written by with_own_checksum; a file without one (written before it
// existed) passes.
Status check_own_checksum(const std::string& path, const std::string& text) {
  const size_t at = text.rfind(kChecksumField);
  if (at == std::string::npos) return Status::ok();
  const std::string_view tail = std::string_view(text).substr(at + kChecksumField.size());
  uint32_t stored = 0;
  const auto [ptr, ec] = std::from_chars(tail.data(), tail.data() + std::min<size_t>(tail.size(), 8), stored, 16);
  if (tail.size() != 12 || ec != std::errc() || ptr != tail.data() + 8 || tail.substr(8) != "\"\n}\n")
    return Status::corrupt(path + ": malformed checksum field at byte offset " + std::to_string(at + 2));
  const std::string original = text.substr(0, at) + "\n}\n";
  const uint32_t computed = crc32c(original.data(), original.size());
  if (computed != stored) {
    char msg[96];
    std::snprintf(msg, sizeof msg, ": checksum mismatch (stored crc32c:%08x, computed %08x)", stored, computed);
    return Status::corrupt(path + msg + ": the file was edited or damaged");
  }
  return Status::ok();
}

std::string meta_to_json(const CheckpointMeta& m, const ParamTable& table, const nlohmann::json& files) {
  nlohmann::ordered_json j;
  j["format"] = "lansbert-checkpoint";
  j["format_version"] = kCheckpointFormatVersion;
  j["param_layout"] = param_layout_fingerprint(table);
  j["step"] = m.step;
  j["micro_step"] = m.micro_step;
  j["data"] = {{"epoch", m.data.epoch}, {"consumed", m.data.consumed}};
  if (!m.train_data_json.empty()) j["train_data"] = nlohmann::ordered_json::parse(m.train_data_json);
  j["seed"] = m.seed;
  j["world"] = m.world;
  j["optimizer"] = nlohmann::ordered_json::parse(state_to_json(m.optimizer));
  j["config"] = nlohmann::ordered_json::parse(m.config_json);
  j["files"] = files;
  return with_own_checksum(j.dump(2) + "\n");
}

}  // namespace

BytesSeen digest_into(FileDigest* d) {
  return [d](const void* p, size_t n) {
    d->crc32c = crc32c(p, n, d->crc32c);
    d->bytes += n;
  };
}

std::string param_layout_fingerprint(const ParamTable& table) {
  uint32_t crc = 0;
  for (const ParamEntry& e : table.entries()) {
    const std::string line = e.name + ":" + std::to_string(e.offset) + ":" + std::to_string(e.numel) + ";";
    crc = crc32c(line.data(), line.size(), crc);
  }
  char buf[32];
  std::snprintf(buf, sizeof buf, "crc32c:%08x/%zu", crc, table.size());
  return buf;
}

Status check_param_layout(const std::string& dir, const CheckpointMeta& meta, const ParamTable& table) {
  const std::string mine = param_layout_fingerprint(table);
  if (meta.param_layout == mine) return Status::ok();
  const std::string path = (fs::path(dir) / kMeta).string();
  if (meta.format_version < 2)
    return Status::unsupported(path + ": format version " + std::to_string(meta.format_version) +
                               " checkpoint: its optimizer state predates the packed query/key/value layout and "
                               "cannot be loaded by this build; its weights can (--init-from with "
                               "phase_start: reset starts fresh moments from them)");
  return Status::invalid_argument(path + ": optimizer state laid out for parameter layout " + meta.param_layout +
                                  ", this model's is " + mine + " (written by a build with another parameter "
                                  "table); its weights can be loaded with --init-from and phase_start: reset");
}

std::string checkpoint_step_dir(const std::string& root, int64_t step) {
  return (fs::path(root) / step_name(step)).string();
}

std::string optimizer_slice_file(int rank) {
  char buf[48];
  std::snprintf(buf, sizeof buf, "optimizer.state.rank-%05d", rank);
  return buf;
}

std::string checkpoint_tmp_dir(const std::string& root, int64_t step, int64_t tag) {
  return (fs::path(root) / (".tmp-" + step_name(step) + "-" + std::to_string(tag))).string();
}

Status create_checkpoint_tmp(const std::string& root, const std::string& tmp) {
  std::error_code ec;
  fs::create_directories(root, ec);
  if (ec) return Status::io_error(root + ": cannot create checkpoint directory: " + ec.message());
  fs::remove_all(tmp, ec);
  fs::create_directory(tmp, ec);
  if (ec) return Status::io_error(tmp + ": " + ec.message());
  return Status::ok();
}

void remove_checkpoint_tmp(const std::string& tmp) {
  std::error_code ec;
  fs::remove_all(tmp, ec);  // best effort: the write's own error is what gets reported
}

Status write_optimizer_slice(const std::string& tmp, int rank, const OptimizerState& state,
                             const float* m, const float* v, size_t begin, size_t end,
                             OptimizerSlice* slice) {
  slice->begin = begin;
  slice->end = end;
  slice->file = optimizer_slice_file(rank);
  const std::string path = (fs::path(tmp) / slice->file).string();
  slice->digest = {};
  // save_state fsyncs before its rename; the digest is of the bytes as they were written.
  return save_state(path, state, m, v, end - begin, digest_into(&slice->digest));
}

namespace {

// Writes the params and trainer.json into tmp (which already holds the optimizer files in
// `optimizer_files`, each with the digest its writer took as it wrote it), then renames it
// into place and swaps the pointers. No file is read back: each digest is of the bytes as
// written, and a file's size here must agree with it (a slice another rank wrote to a
// directory this host does not share is missing or differs).
Status commit(const std::string& root, const fs::path& tmp, const CheckpointMeta& meta,
              const ParamTable& table, const float* params, const std::map<std::string, FileDigest>& optimizer_files,
              int keep_last, bool final, std::string* written) {
  std::error_code ec;
  const std::string name = step_name(meta.step);
  const fs::path final_dir = fs::path(root) / name;
  const std::map<std::string, std::string> st_meta = {
      {"format", "pt"}, {"lansbert_step", std::to_string(meta.step)}};
  FileDigest model;
  LB_RETURN_IF_ERROR(
      write_safetensors((tmp / kModel).string(), table, params, st_meta, StDtype::kF32, digest_into(&model)));
  LB_RETURN_IF_ERROR(fsync_path((tmp / kModel).string()));
  nlohmann::json files;
  files[kModel] = {{"bytes", model.bytes}, {"crc32c", model.crc32c}};
  for (const auto& [f, digest] : optimizer_files) {
    const uintmax_t size = fs::file_size(tmp / f, ec);
    if (ec)
      return Status::io_error((tmp / f).string() + ": missing (checkpoint directories must be on a "
                              "file system every rank shares)");
    if (size != digest.bytes)
      return Status::io_error((tmp / f).string() + ": " + std::to_string(size) + " bytes here, " +
                              std::to_string(digest.bytes) + " as its rank wrote it (checkpoint directories "
                              "must be on a file system every rank shares)");
    files[f] = {{"bytes", digest.bytes}, {"crc32c", digest.crc32c}};
  }
  const std::string json = meta_to_json(meta, table, files);
  LB_RETURN_IF_ERROR(write_file_atomic((tmp / kMeta).string(), {json}));
  LB_RETURN_IF_ERROR(fsync_directory(tmp.string()));
  if (const char* s = std::getenv("LANSBERT_TEST_CHECKPOINT_SLEEP")) ::sleep(std::atoi(s));
  bool renamed = false;
  if (fs::exists(final_dir)) {
    // The same step again (a resumed run stopped before its first update): same content.
    fs::remove_all(tmp, ec);
  } else {
    fs::rename(tmp, final_dir, ec);
    if (ec) return Status::io_error(final_dir.string() + ": rename failed: " + ec.message());
    renamed = true;
  }
  Status moved = fsync_directory(root);
  if (moved.is_ok()) moved = point(root, "latest", name);
  if (!moved.is_ok()) {
    // point() can fail after its rename (the directory's fsync): `latest` names this step
    // then, which must stay. Otherwise not written after all: a step directory past `latest`
    // would make the next --resume latest refuse to run (check_checkpoint_root). Moved back,
    // the caller removes it.
    std::error_code link;
    if (fs::read_symlink(fs::path(root) / "latest", link) == fs::path(name))
      return Status::io_error(moved.message() + "; " + final_dir.string() + " is complete and `latest` points to "
                              "it, but the directory was not synced: it may not survive a crash of the host");
    std::error_code undo;
    if (renamed) fs::rename(final_dir, tmp, undo);
    if (renamed && !undo) return moved;
    return Status::io_error(moved.message() + "; " + final_dir.string() + " is complete but `latest` does not " +
                            "point to it: --resume " + final_dir.string() + " continues from it");
  }
  if (final) LB_RETURN_IF_ERROR(point(root, "final", name));
  prune(root, keep_last, name);
  *written = final_dir.string();
  return Status::ok();
}

}  // namespace

Status write_checkpoint(const std::string& root, const CheckpointMeta& meta,
                        const ParamTable& table, const float* params, const float* m,
                        const float* v, int keep_last, bool final, std::string* written) {
  const fs::path tmp = checkpoint_tmp_dir(root, meta.step, ::getpid());
  FileDigest state;
  Status st = create_checkpoint_tmp(root, tmp.string());
  if (st.is_ok())  // fsynced before its rename
    st = save_state((tmp / kOptimizer).string(), meta.optimizer, m, v, table.total_elements(), digest_into(&state));
  if (st.is_ok()) st = commit(root, tmp, meta, table, params, {{kOptimizer, state}}, keep_last, final, written);
  if (!st.is_ok()) remove_checkpoint_tmp(tmp.string());
  return st;
}

Status commit_sharded_checkpoint(const std::string& root, const std::string& tmp,
                                 const CheckpointMeta& meta, const ParamTable& table,
                                 const float* params, const std::vector<OptimizerSlice>& slices,
                                 int keep_last, bool final, std::string* written) {
  nlohmann::ordered_json man;
  man["format"] = "lansbert-optimizer-slices";
  man["world"] = slices.size();
  man["elements"] = table.total_elements();
  man["slices"] = nlohmann::ordered_json::array();
  std::map<std::string, FileDigest> files;
  size_t next = 0;
  for (size_t r = 0; r < slices.size(); ++r) {
    const OptimizerSlice& s = slices[r];
    if (s.begin != next || s.end < s.begin)
      return Status::internal("optimizer slices do not tile the flat buffer at rank " + std::to_string(r));
    next = s.end;
    man["slices"].push_back({{"rank", r}, {"begin", s.begin}, {"end", s.end}, {"file", s.file}});
    files[s.file] = s.digest;
  }
  if (next != table.total_elements())
    return Status::internal("optimizer slices end at " + std::to_string(next) + ", not at " +
                            std::to_string(table.total_elements()));
  const std::string text = man.dump(2) + "\n";
  LB_RETURN_IF_ERROR(write_file_atomic((fs::path(tmp) / kManifest).string(), {text}));
  digest_into(&files[kManifest])(text.data(), text.size());
  return commit(root, tmp, meta, table, params, files, keep_last, final, written);
}

Status check_checkpoint_root(const std::string& root, int64_t resumed_step) {
  LB_RETURN_IF_ERROR(check_can_create(root, PathKind::kDirectory, "checkpoint.dir"));
  std::error_code ec;
  // A checkpoint as the directory of a new run's checkpoints: they would nest in it, and
  // --resume latest would find its trainer.json before their `latest`.
  if (fs::exists(fs::path(root) / kMeta, ec))
    return Status::invalid_argument(root + " (checkpoint.dir) is itself a checkpoint (it holds " + std::string(kMeta) +
                                    "): give the run a directory of its own; to continue that run exactly, "
                                    "--resume " + root + " with another checkpoint.dir; to start a new phase "
                                    "from it, --init-from " + root);
  // The pointers a save replaces: anything else by those names would be lost to it.
  for (const char* name : {"latest", "final"}) {
    const fs::path p = fs::path(root) / name;
    const fs::file_status st = fs::symlink_status(p, ec);
    if (fs::exists(st) && !fs::is_symlink(st))
      return Status::invalid_argument(
          p.string() + " is not a checkpoint pointer (a symlink) but a " + (fs::is_directory(st) ? "directory" : "file") +
          ", which a checkpoint would replace: move it away or set another checkpoint.dir" +
          (fs::is_directory(st) ? " (a copy that followed the links? put the link back: rm -r " + p.string() +
                                      " && ln -s step-NNNNNNNNN " + p.string() + ")"
                                : std::string()));
  }
  int64_t newest = -1;
  for (const std::string& n : checkpoint_step_dirs(root)) newest = std::max(newest, checkpoint_step_of(n));
  if (newest < 0) return Status::ok();
  const std::string found = root + " (checkpoint.dir) holds " + step_name(newest);
  if (resumed_step < 0)
    return Status::invalid_argument(found + " of an earlier run; continue it with --resume latest, or give "
                                    "this run another checkpoint.dir (checkpoints are never overwritten)");
  if (newest > resumed_step)
    return Status::invalid_argument(found + ", later than the resumed " + step_name(resumed_step) +
                                    ", which this run would replace; move the later checkpoints "
                                    "elsewhere or set another checkpoint.dir (or, if the run stopped after "
                                    "writing " + step_name(newest) + " but before `latest` pointed to it, "
                                    "--resume " + (fs::path(root) / step_name(newest)).string() +
                                    " continues from there)");
  return Status::ok();
}

Status resolve_checkpoint(const std::string& spec, std::string* dir) {
  std::error_code ec;
  if (fs::exists(fs::path(spec) / kMeta, ec)) {
    *dir = spec;
    return Status::ok();
  }
  const fs::path latest = fs::path(spec) / "latest";
  if (fs::exists(latest / kMeta, ec)) {
    *dir = fs::canonical(latest, ec).string();
    return Status::ok();
  }
  if (!fs::exists(spec, ec)) return Status::not_found(spec + ": no such checkpoint directory");
  // A pointer to a checkpoint that is gone (removed by hand, or a copy without it) is named.
  if (fs::is_symlink(fs::symlink_status(latest, ec)))
    return Status::not_found(latest.string() + " points to " + fs::read_symlink(latest, ec).string() +
                             ", which holds no checkpoint (no trainer.json)");
  return Status::not_found(spec + ": no checkpoint here (neither trainer.json nor a 'latest' pointer)");
}

Status read_checkpoint_meta(const std::string& dir, CheckpointMeta* meta) {
  const std::string path = (fs::path(dir) / kMeta).string();
  std::string text;
  LB_RETURN_IF_ERROR(read_file(path, &text));
  LB_RETURN_IF_ERROR(check_own_checksum(path, text));
  std::string reading;  // the field being read, for the message of a wrong type or a missing key
  try {
    const nlohmann::json j = nlohmann::json::parse(text);
    if (j.value("format", "") != "lansbert-checkpoint")
      return Status::corrupt(path + ": not a lansbert checkpoint (format field)");
    reading = "format_version";
    const int version = j.at("format_version").get<int>();
    if (version < kOldestCheckpointFormatVersion || version > kCheckpointFormatVersion)
      return Status::unsupported(path + ": checkpoint format version " + std::to_string(version) +
                                 ", this build reads versions " + std::to_string(kOldestCheckpointFormatVersion) +
                                 " to " + std::to_string(kCheckpointFormatVersion));
    CheckpointMeta m;
    m.format_version = version;
    reading = "param_layout";
    if (version >= 2) m.param_layout = j.at("param_layout").get<std::string>();
    // Counts are read signed and checked, so that a hand edit or a flipped sign bit is an
    // error naming the field (an unsigned read would wrap -1 to 2^64 - 1).
    auto count = [&](const nlohmann::json& v, const char* field, int64_t least) -> int64_t {
      reading = field;
      const int64_t x = v.get<int64_t>();
      if (x < least)
        throw std::out_of_range(std::string(field) + " = " + std::to_string(x) + ", expected at least " +
                                std::to_string(least));
      return x;
    };
    auto at = [&](const nlohmann::json& parent, const char* key, const char* field) -> const nlohmann::json& {
      reading = field;
      return parent.at(key);
    };
    m.step = count(at(j, "step", "step"), "step", 0);
    m.micro_step = uint64_t(count(at(j, "micro_step", "micro_step"), "micro_step", 0));
    m.data.epoch = uint64_t(count(at(at(j, "data", "data"), "epoch", "data.epoch"), "data.epoch", 0));
    m.data.consumed = uint64_t(count(at(at(j, "data", "data"), "consumed", "data.consumed"), "data.consumed", 0));
    if (j.contains("train_data")) {
      // What a resume prints and --init-from compares; typed here so those never meet a wrong type.
      const nlohmann::json& td = j["train_data"];
      if (!td.is_object()) throw std::out_of_range("train_data is not an object");
      for (const char* key : {"samples", "files", "digest"})
        if (td.contains(key) && !td[key].is_number_unsigned())
          throw std::out_of_range(std::string("train_data.") + key + " is not a count: " + td[key].dump());
      for (const char* key : {"source_samples", "source_digests"})
        if (td.contains(key) && (!td[key].is_array() || !std::all_of(td[key].begin(), td[key].end(), [](const auto& n) {
                                   return n.is_number_unsigned();
                                 })))
          throw std::out_of_range(std::string("train_data.") + key + " is not a list of counts: " + td[key].dump());
      if (td.contains("vocab_hash") && !td["vocab_hash"].is_string())
        throw std::out_of_range("train_data.vocab_hash is not a string: " + td["vocab_hash"].dump());
      m.train_data_json = td.dump();
    }
    m.seed = at(j, "seed", "seed").get<uint64_t>();
    m.world = int(count(at(j, "world", "world"), "world", 1));
    // The sections a resume or --init-from compares field by field must be objects: a hand
    // edit that makes one a number is this file's error, not an exception in the comparison.
    const nlohmann::json& config = at(j, "config", "config");
    if (!config.is_object()) throw std::out_of_range("config is not an object");
    for (const char* section : {"model", "batch"})
      if (!config.at(section).is_object()) throw std::out_of_range(std::string("config.") + section + " is not an object");
    if (config.contains("data") && !config["data"].is_object()) throw std::out_of_range("config.data is not an object");
    if (config["batch"].contains("micro_batch") && !config["batch"]["micro_batch"].is_number_integer())
      throw std::out_of_range("config.batch.micro_batch is not an integer: " + config["batch"]["micro_batch"].dump());
    if (config["model"].contains("hidden_act") && !config["model"]["hidden_act"].is_string())
      throw std::out_of_range("config.model.hidden_act is not a string");
    m.config_json = config.dump();
    LB_RETURN_IF_ERROR(state_from_json(at(j, "optimizer", "optimizer").dump(), &m.optimizer));
    for (const auto& [f, want] : at(j, "files", "files").items()) {
      reading = "files." + f;
      m.files[f] = {want.at("bytes").get<uint64_t>(), want.at("crc32c").get<uint32_t>()};
    }
    *meta = std::move(m);
    return Status::ok();
  } catch (const nlohmann::json::exception& e) {
    return Status::corrupt(path + ": malformed" + (reading.empty() ? "" : " field '" + reading + "'") + ": " +
                           json_reason(e));
  } catch (const std::out_of_range& e) {
    return Status::corrupt(path + ": " + e.what());
  }
}

uint64_t checkpoint_bytes_estimate(const ParamTable& table) {
  return 4 * uint64_t(table.parameter_count()) + 8 * uint64_t(table.total_elements());
}

std::string checkpoint_space_warning(const std::string& root, uint64_t free_bytes, uint64_t checkpoint_bytes,
                                     int keep_last, int existing) {
  // In 64 bits: keep_last may be as large as an int holds, and the product is bytes.
  const int64_t more = std::max<int64_t>(int64_t(keep_last) + 1 - std::min(existing, keep_last), 1);
  const uint64_t peak = uint64_t(more) * checkpoint_bytes;
  if (free_bytes >= peak) return "";
  const std::string head = "checkpoint.dir " + root + ": " + byte_text(free_bytes) + " free on its file system, and a " +
                           "checkpoint of this run takes about " + byte_text(checkpoint_bytes);
  if (free_bytes < checkpoint_bytes)
    return head + ": the first checkpoint will fail and stop the run unless space is freed (or checkpoint.dir "
                  "moves to a larger file system)";
  return head + "; keeping checkpoint.keep_last " + std::to_string(keep_last) + " of them needs up to " + byte_text(peak) +
         " more: a later checkpoint will fail unless space is freed (or checkpoint.keep_last is lowered)";
}

bool checkpoint_room(const std::string& root, uint64_t checkpoint_bytes, int keep_last, uint64_t* free_bytes,
                     std::string* warning) {
  if (!free_bytes_under(root, free_bytes)) return false;
  *warning = checkpoint_space_warning(root, *free_bytes, checkpoint_bytes, keep_last,
                                      int(checkpoint_step_dirs(root).size()));
  return true;
}

int64_t checkpoint_step_of(const std::string& step_dir_name) { return std::stoll(step_dir_name.substr(5)); }

std::vector<std::string> checkpoint_step_dirs(const std::string& root) {
  std::vector<std::string> out;
  for (const std::string& n : step_dirs(root)) {
    long long step = -1;
    char tail = 0;
    if (std::sscanf(n.c_str(), "step-%lld%c", &step, &tail) == 1 && n == step_name(step)) out.push_back(n);
  }
  return out;
}

}  // namespace lansbert
