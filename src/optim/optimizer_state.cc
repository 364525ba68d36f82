// OptimizerState serialisation: the scalars as JSON (for checkpoint metadata) and one
// self-checking file holding the scalars with both moment buffers. The file is written to a
// temporary name, flushed, fsynced and renamed, so a crash never leaves a torn state file.
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "lansbert/optim/updater.h"

namespace lansbert {
namespace {

constexpr char kMagic[8] = {'L', 'B', 'O', 'P', 'T', 'S', 'T', '\0'};
constexpr uint32_t kVersion = 1;

// FNV-1a 64, fed incrementally.
struct Fnv64 {
  uint64_t h = 1469598103934665603ull;
  void add(const void* p, size_t n) {
    const auto* b = static_cast<const unsigned char*>(p);
    for (size_t i = 0; i < n; ++i) h = (h ^ b[i]) * 1099511628211ull;
  }
};

// Reads n bytes and feeds the checksum and `seen`; false at end of file.
bool read_all(std::FILE* f, void* p, size_t n, Fnv64* sum, const BytesSeen& seen) {
  if (std::fread(p, 1, n, f) != n) return false;
  if (sum) sum->add(p, n);
  if (seen) seen(p, n);
  return true;
}

bool write_all(std::FILE* f, const void* p, size_t n, Fnv64* sum, const BytesSeen& seen) {
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
  if (!f) return Status::io_error(tmp + ": cannot open for writing");
  const std::string json = state_to_json(state);
  const uint32_t json_len = static_cast<uint32_t>(json.size());
  const uint64_t n = elements;
  Fnv64 sum;
  const auto write = [&](const void* p, size_t n, Fnv64* fnv) { return write_all(f, p, n, fnv, written); };
  bool ok = write(kMagic, sizeof(kMagic), &sum) && write(&kVersion, sizeof(kVersion), &sum) &&
            write(&json_len, sizeof(json_len), &sum) && write(json.data(), json.size(), &sum) &&
            write(&n, sizeof(n), &sum) && write(m, elements * sizeof(float), &sum) &&
            write(v, elements * sizeof(float), &sum);
  ok = ok && write(&sum.h, sizeof(sum.h), nullptr);
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
    std::remove(tmp.c_str());
    return Status::io_error(path + ": rename from " + tmp + " failed");
  }
  return Status::ok();
}

Status load_state(const std::string& path, OptimizerState* state, float* m, float* v,
                  size_t elements, const BytesSeen& seen) {
  std::FILE* f = std::fopen(path.c_str(), "rb");
  if (!f) return Status::not_found(path + ": cannot open optimizer state");
  Fnv64 sum;
  char magic[8];
  uint32_t version = 0, json_len = 0;
  uint64_t n = 0, stored = 0;
  std::string json;
  Status s = Status::ok();
  const auto read = [&](void* p, size_t n, Fnv64* fnv) { return read_all(f, p, n, fnv, seen); };
  if (!read(magic, sizeof(magic), &sum) || std::memcmp(magic, kMagic, 8) != 0) {
    s = Status::corrupt(path + ": not an optimizer state file (bad magic)");
  } else if (!read(&version, sizeof(version), &sum) || version != kVersion) {
    s = Status::corrupt(path + ": unsupported optimizer state version " + std::to_string(version));
  } else if (!read(&json_len, sizeof(json_len), &sum) || json_len > (1u << 20)) {
    s = Status::corrupt(path + ": bad scalar block length");
  } else {
    json.resize(json_len);
    if (!read(json.data(), json_len, &sum) || !read(&n, sizeof(n), &sum)) {
      s = Status::corrupt(path + ": truncated header");
    } else if (n != elements) {
      s = Status::corrupt(path + ": holds " + std::to_string(n) +
                          " moment elements, the model has " + std::to_string(elements));
    } else if (!read(m, elements * sizeof(float), &sum) ||
               !read(v, elements * sizeof(float), &sum) ||
               !read(&stored, sizeof(stored), nullptr)) {
      s = Status::corrupt(path + ": truncated moments");
    } else if (stored != sum.h) {
      s = Status::corrupt(path + ": checksum mismatch");
    }
  }
  std::fclose(f);
  if (!s.is_ok()) return s;
  return state_from_json(json, state);
}

}  // namespace lansbert
