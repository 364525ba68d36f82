// Checkpoint writing (temp dir, fsync, rename, pointer swap, pruning) and reading (pointer
// resolution, trainer.json, checksums). See checkpoint.h for the layout and the guarantees.
#include "lansbert/train/checkpoint.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <nlohmann/json.hpp>

#include "lansbert/core/file_io.h"
#include "lansbert/data/crc32c.h"
#include "lansbert/model/safetensors.h"

namespace lansbert {
namespace fs = std::filesystem;
namespace {

constexpr const char* kModelFile = "model.safetensors";
constexpr const char* kOptimizerFile = "optimizer.state";
constexpr const char* kMetaFile = "trainer.json";

std::string step_name(int64_t step) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "step-%09lld", static_cast<long long>(step));
  return buf;
}

Status file_digest(const std::string& path, nlohmann::json* out) {
  std::string bytes;
  LB_RETURN_IF_ERROR(read_file(path, &bytes));
  *out = {{"bytes", bytes.size()}, {"crc32c", crc32c(bytes.data(), bytes.size())}};
  return Status::ok();
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

void prune(const std::string& root, int keep_last, const std::string& keep) {
  std::vector<std::string> steps;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(root, ec)) {
    const std::string n = e.path().filename().string();
    if (n.rfind("step-", 0) == 0 && e.is_directory() && !e.is_symlink()) steps.push_back(n);
  }
  std::sort(steps.begin(), steps.end());
  for (size_t i = 0; i + keep_last < steps.size(); ++i)
    if (steps[i] != keep) fs::remove_all(fs::path(root) / steps[i], ec);
}

std::string meta_to_json(const CheckpointMeta& m, const nlohmann::json& files) {
  nlohmann::ordered_json j;
  j["format"] = "lansbert-checkpoint";
  j["format_version"] = kCheckpointFormatVersion;
  j["step"] = m.step;
  j["micro_step"] = m.micro_step;
  j["data"] = {{"epoch", m.data.epoch}, {"consumed", m.data.consumed}};
  j["seed"] = m.seed;
  j["world"] = m.world;
  j["optimizer"] = nlohmann::ordered_json::parse(state_to_json(m.optimizer));
  j["config"] = nlohmann::ordered_json::parse(m.config_json);
  j["files"] = files;
  return j.dump(2) + "\n";
}

}  // namespace

Status write_checkpoint(const std::string& root, const CheckpointMeta& meta,
                        const ParamTable& table, const float* params, const float* m,
                        const float* v, int keep_last, bool final, std::string* written) {
  std::error_code ec;
  fs::create_directories(root, ec);
  if (ec) return Status::io_error(root + ": cannot create checkpoint directory: " + ec.message());
  const std::string name = step_name(meta.step);
  const fs::path final_dir = fs::path(root) / name;
  const fs::path tmp = fs::path(root) / (".tmp-" + name + "-" + std::to_string(::getpid()));
  fs::remove_all(tmp, ec);
  fs::create_directory(tmp, ec);
  if (ec) return Status::io_error(tmp.string() + ": " + ec.message());
  const std::map<std::string, std::string> st_meta = {
      {"format", "pt"}, {"lansbert_step", std::to_string(meta.step)}};
  LB_RETURN_IF_ERROR(write_safetensors((tmp / kModelFile).string(), table, params, st_meta));
  LB_RETURN_IF_ERROR(save_state((tmp / kOptimizerFile).string(), meta.optimizer, m, v,
                                table.total_elements()));
  LB_RETURN_IF_ERROR(fsync_path((tmp / kModelFile).string()));
  LB_RETURN_IF_ERROR(fsync_path((tmp / kOptimizerFile).string()));
  nlohmann::json files;
  LB_RETURN_IF_ERROR(file_digest((tmp / kModelFile).string(), &files[kModelFile]));
  LB_RETURN_IF_ERROR(file_digest((tmp / kOptimizerFile).string(), &files[kOptimizerFile]));
  const std::string json = meta_to_json(meta, files);
  LB_RETURN_IF_ERROR(write_file_atomic((tmp / kMetaFile).string(), {json}));
  LB_RETURN_IF_ERROR(fsync_directory(tmp.string()));
  if (const char* s = std::getenv("LANSBERT_TEST_CHECKPOINT_SLEEP")) ::sleep(std::atoi(s));
  if (fs::exists(final_dir)) {
    // The same step again (a resumed run stopped before its first update): same content.
    fs::remove_all(tmp, ec);
  } else {
    fs::rename(tmp, final_dir, ec);
    if (ec) return Status::io_error(final_dir.string() + ": rename failed: " + ec.message());
  }
  LB_RETURN_IF_ERROR(fsync_directory(root));
  LB_RETURN_IF_ERROR(point(root, "latest", name));
  if (final) LB_RETURN_IF_ERROR(point(root, "final", name));
  prune(root, keep_last, name);
  *written = final_dir.string();
  return Status::ok();
}

Status resolve_checkpoint(const std::string& spec, std::string* dir) {
  std::error_code ec;
  if (fs::exists(fs::path(spec) / kMetaFile, ec)) {
    *dir = spec;
    return Status::ok();
  }
  const fs::path latest = fs::path(spec) / "latest";
  if (fs::exists(latest / kMetaFile, ec)) {
    *dir = fs::canonical(latest, ec).string();
    return Status::ok();
  }
  if (!fs::exists(spec, ec)) return Status::not_found(spec + ": no such checkpoint directory");
  return Status::not_found(spec + ": no checkpoint here (neither trainer.json nor a 'latest' pointer)");
}

Status read_checkpoint_meta(const std::string& dir, CheckpointMeta* meta) {
  const std::string path = (fs::path(dir) / kMetaFile).string();
  std::string text;
  LB_RETURN_IF_ERROR(read_file(path, &text));
  try {
    const nlohmann::json j = nlohmann::json::parse(text);
    if (j.value("format", "") != "lansbert-checkpoint")
      return Status::corrupt(path + ": not a lansbert checkpoint (format field)");
    const int version = j.at("format_version").get<int>();
    if (version != kCheckpointFormatVersion)
      return Status::unsupported(path + ": checkpoint format version " + std::to_string(version) +
                                 ", this build reads version " + std::to_string(kCheckpointFormatVersion));
    CheckpointMeta m;
    m.step = j.at("step").get<int64_t>();
    m.micro_step = j.at("micro_step").get<uint64_t>();
    m.data.epoch = j.at("data").at("epoch").get<uint64_t>();
    m.data.consumed = j.at("data").at("consumed").get<uint64_t>();
    m.seed = j.at("seed").get<uint64_t>();
    m.world = j.at("world").get<int>();
    m.config_json = j.at("config").dump();
    LB_RETURN_IF_ERROR(state_from_json(j.at("optimizer").dump(), &m.optimizer));
    for (const char* f : {kModelFile, kOptimizerFile}) {
      const auto& want = j.at("files").at(f);
      nlohmann::json got;
      LB_RETURN_IF_ERROR(file_digest((fs::path(dir) / f).string(), &got));
      if (got["bytes"] != want.at("bytes") || got["crc32c"] != want.at("crc32c"))
        return Status::corrupt((fs::path(dir) / f).string() + ": size or CRC32C differs from " +
                               path + " (the file is damaged or was replaced)");
    }
    *meta = std::move(m);
    return Status::ok();
  } catch (const nlohmann::json::exception& e) {
    return Status::corrupt(path + ": malformed: " + e.what());
  }
}

Status load_checkpoint_params(const std::string& dir, const ParamTable& table, float* params) {
  SafetensorsFile file;
  LB_RETURN_IF_ERROR(read_safetensors((fs::path(dir) / kModelFile).string(), &file));
  return load_params(file, table, params);
}

Status load_checkpoint_optimizer(const std::string& dir, size_t elements, OptimizerState* state,
                                 float* m, float* v) {
  return load_state((fs::path(dir) / kOptimizerFile).string(), state, m, v, elements);
}

}  // namespace lansbert
