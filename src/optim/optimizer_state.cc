// OptimizerState serialisation: the scalars as JSON (for checkpoint metadata) and one
// self-checking file holding the scalars with both moment buffers. The file is written to a
// temporary name, flushed, fsynced and renamed, so a crash never leaves a torn state file.
// Version 2 ends with a CRC32C (SSE4.2 computes it at several GB/s); version 1 files, which
// end with an FNV-1a 64 (a multiply per byte: about 1 GB/s, 2.7 s for bert-large's moments on
// every save and load), are still read.
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "lansbert/core/crc32c.h"
#include "lansbert/optim/updater.h"

namespace lansbert {
namespace {

constexpr char kMagic[8] = {'L', 'B', 'O', 'P', 'T', 'S', 'T', '\0'};
constexpr uint32_t kVersion = 2;        // written
constexpr uint32_t kOldestVersion = 1;  // read

// The file's checksum of everything before it, fed incrementally: FNV-1a 64 in version 1,
// CRC32C from version 2 on.
struct Checksum {
  uint32_t version = kVersion;
  uint64_t fnv = 1469598103934665603ull;
  uint32_t crc = 0;
  void add(const void* p, size_t n) {
    if (version >= 2) {
      crc = crc32c(p, n, crc);
      return;
    }
    const auto* b = static_cast<const unsigned char*>(p);
    for (size_t i = 0; i < n; ++i) fnv = (fnv ^ b[i]) * 1099511628211ull;
  }
  // The trailer's bytes: 8 in version 1, 4 after.
  size_t size() const { return version >= 2 ? sizeof crc : sizeof fnv; }
  void* data() { return version >= 2 ? static_cast<void*>(&crc) : &fnv; }
};

// Reads n bytes and feeds the checksum and `seen`; false at end of file.
bool read_all(std::FILE* f, void* p, size_t n, Checksum* sum, const BytesSeen& seen) {
  if (std::fread(p, 1, n, f) != n) return false;
  if (sum) sum->add(p, n);
  if (seen) seen(p, n);
  return true;
}

bool write_all(std::FILE* f, const void* p, size_t n, Checksum* sum, const BytesSeen& seen) {
  if (sum) sum->add(p, n);
  if (seen) seen(p, n);
  return std::fwrite(p, 1, n, f) == n;
}

}  // namespace

std::string state_to_json(const OptimizerState& s) {
  nlohmann::json j;
  j["optimizer"] = s.optimizer;
  j["step"] = s.step;
  j["schedule_step"] = s.schedule_step;
  j["skipped_steps"] = s.skipped_steps;
  j["consecutive_skips"] = s.consecutive_skips;
  j["phase"] = s.phase;
  j["phase_start"] = s.phase_start;
  j["loss_scale"] = s.scaler.scale;
  j["scaler_growth_tracker"] = s.scaler.growth_tracker;
  j["scaler_hysteresis_left"] = s.scaler.hysteresis_left;
  return j.dump();
}

Status state_from_json(const std::string& text, OptimizerState* s) {
  nlohmann::json j = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded() || !j.is_object()) {
    return Status::corrupt("optimizer state: scalars are not a JSON object");
  }
  try {
    s->optimizer = j.at("optimizer").get<std::string>();
    s->step = j.at("step").get<int64_t>();
    s->schedule_step = j.at("schedule_step").get<int64_t>();
    s->skipped_steps = j.at("skipped_steps").get<int64_t>();
    s->consecutive_skips = j.at("consecutive_skips").get<int64_t>();
    s->phase = j.at("phase").get<int64_t>();
    s->phase_start = j.at("phase_start").get<std::string>();
    s->scaler.scale = j.at("loss_scale").get<double>();
    s->scaler.growth_tracker = j.at("scaler_growth_tracker").get<int64_t>();
    s->scaler.hysteresis_left = j.at("scaler_hysteresis_left").get<int64_t>();
  } catch (const nlohmann::json::exception& e) {
    return Status::corrupt(std::string("optimizer state: ") + e.what());
  }
  return Status::ok();
}

Status save_state(const std::string& path, const OptimizerState& state, const float* m,
                  const float* v, size_t elements, const BytesSeen& written) {
  const std::string tmp = path + ".tmp";
  std::FILE* f = std::fopen(tmp.c_str(), "wb");
  if (!f) return Status::io_error(tmp + ": cannot open for writing: " + std::strerror(errno));
  const std::string json = state_to_json(state);
  const uint32_t json_len = static_cast<uint32_t>(json.size());
  const uint64_t n = elements;
  Checksum sum;
  const auto write = [&](const void* p, size_t n, Checksum* c) { return write_all(f, p, n, c, written); };
  bool ok = write(kMagic, sizeof(kMagic), &sum) && write(&kVersion, sizeof(kVersion), &sum) &&
            write(&json_len, sizeof(json_len), &sum) && write(json.data(), json.size(), &sum) &&
            write(&n, sizeof(n), &sum) && write(m, elements * sizeof(float), &sum) &&
            write(v, elements * sizeof(float), &sum);
  ok = ok && write(sum.data(), sum.size(), nullptr);
  ok = ok && std::fflush(f) == 0 && ::fsync(::fileno(f)) == 0;
  // The cause of the first failure (a full disk, a quota), before fclose can change errno.
  std::string why = ok ? "" : std::strerror(errno);
  ok = (std::fclose(f) == 0) && ok;
  if (!ok) {
    if (why.empty()) why = std::strerror(errno);
    std::remove(tmp.c_str());
    return Status::io_error(tmp + ": write failed: " + why);
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0) {
    const std::string why = std::strerror(errno);
    std::remove(tmp.c_str());
    return Status::io_error(path + ": rename from " + tmp + " failed: " + why);
  }
  return Status::ok();
}

Status load_state(const std::string& path, OptimizerState* state, float* m, float* v,
                  size_t elements, const BytesSeen& seen) {
  std::FILE* f = std::fopen(path.c_str(), "rb");
  if (!f) return Status::not_found(path + ": cannot open optimizer state");
  std::string json;
  const auto parse = [&]() -> Status {
    const auto read = [&](void* p, size_t n, Checksum* c) { return read_all(f, p, n, c, seen); };
    char magic[8];
    uint32_t version = 0, json_len = 0;
    uint64_t n = 0;
    if (!read(magic, sizeof(magic), nullptr) || std::memcmp(magic, kMagic, 8) != 0)
      return Status::corrupt(path + ": not an optimizer state file (bad magic)");
    if (!read(&version, sizeof(version), nullptr) || version < kOldestVersion || version > kVersion)
      return Status::corrupt(path + ": unsupported optimizer state version " + std::to_string(version) +
                             " (this build reads versions " + std::to_string(kOldestVersion) + " to " +
                             std::to_string(kVersion) + ")");
    // Only now is the checksum's kind known; it covers the magic and version too.
    Checksum sum;
    sum.version = version;
    sum.add(magic, sizeof(magic));
    sum.add(&version, sizeof(version));
    if (!read(&json_len, sizeof(json_len), &sum) || json_len > (1u << 20))
      return Status::corrupt(path + ": bad scalar block length");
    json.resize(json_len);
    if (!read(json.data(), json_len, &sum) || !read(&n, sizeof(n), &sum))
      return Status::corrupt(path + ": truncated header");
    if (n != elements)
      return Status::corrupt(path + ": holds " + std::to_string(n) + " moment elements, the model has " +
                             std::to_string(elements));
    Checksum stored = sum;  // of the same kind: the file's trailer is read into it
    if (!read(m, elements * sizeof(float), &sum) || !read(v, elements * sizeof(float), &sum) ||
        !read(stored.data(), stored.size(), nullptr))
      return Status::corrupt(path + ": truncated moments");
    if (std::memcmp(stored.data(), sum.data(), sum.size()) != 0) return Status::corrupt(path + ": checksum mismatch");
    return Status::ok();
  };
  const Status s = parse();
  std::fclose(f);
  if (!s.is_ok()) return s;
  return state_from_json(json, state);
}

}  // namespace lansbert
