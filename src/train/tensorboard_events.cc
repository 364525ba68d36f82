// TensorBoard event files (tensorboard_events.h): the protocol buffer wire format written by
// hand for the three messages lansbert emits, and the TFRecord framing around each.
#include "lansbert/train/tensorboard_events.h"

#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>

#include "lansbert/core/file_io.h"
#include "lansbert/core/host_name.h"
#include "lansbert/core/crc32c.h"

namespace lansbert {
namespace {

// Protocol buffer wire types.
enum Wire : uint32_t { kVarint = 0, kFixed64 = 1, kBytes = 2, kFixed32 = 5 };

void put_varint(std::string* out, uint64_t v) {
  while (v >= 0x80) {
    out->push_back(char(uint8_t(v) | 0x80));
    v >>= 7;
  }
  out->push_back(char(v));
}

void put_key(std::string* out, uint32_t field, Wire wire) { put_varint(out, (uint64_t(field) << 3) | wire); }

// Little-endian, as the wire format stores fixed-width fields (and x86-64 and aarch64 hold them).
template <typename T>
void put_fixed(std::string* out, T v) {
  char b[sizeof(T)];
  std::memcpy(b, &v, sizeof(T));
  out->append(b, sizeof(T));
}

void put_bytes(std::string* out, uint32_t field, const std::string& bytes) {
  put_key(out, field, kBytes);
  put_varint(out, bytes.size());
  out->append(bytes);
}

// Event fields 1 and 2, which every record has (proto3 writes a zero step as nothing).
std::string event_head(double wall_time, int64_t step) {
  std::string e;
  put_key(&e, 1, kFixed64);
  put_fixed(&e, wall_time);
  if (step != 0) {
    put_key(&e, 2, kVarint);
    put_varint(&e, uint64_t(step));  // int64: negative values as their two's complement
  }
  return e;
}

// TFRecord's checksum of a length or of a record: CRC32C rotated and offset, so that a CRC
// stored inside checksummed data does not make the outer CRC trivial.
uint32_t masked_crc(const std::string& bytes) {
  const uint32_t c = crc32c(bytes.data(), bytes.size());
  return ((c >> 15) | (c << 17)) + 0xa282ead8u;
}

std::string framed(const std::string& data) {
  std::string length, out;
  put_fixed(&length, uint64_t(data.size()));
  out = length;
  put_fixed(&out, masked_crc(length));
  out += data;
  put_fixed(&out, masked_crc(data));
  return out;
}

double now_seconds() {
  using namespace std::chrono;
  return duration<double>(system_clock::now().time_since_epoch()).count();
}

}  // namespace

std::string event_record_file_version(double wall_time) {
  std::string e = event_head(wall_time, 0);
  put_bytes(&e, 3, "brain.Event:2");
  return framed(e);
}

std::string event_record_session_start(double wall_time, int64_t step) {
  std::string log;  // SessionLog { status: START }
  put_key(&log, 1, kVarint);
  put_varint(&log, 1);
  std::string e = event_head(wall_time, step);
  put_bytes(&e, 7, log);
  return framed(e);
}

std::string event_record_scalars(double wall_time, int64_t step, const TaggedScalars& scalars) {
  std::string summary;
  for (const auto& [tag, value] : scalars) {
    std::string v;  // Summary.Value { tag, simple_value }
    put_bytes(&v, 1, tag);
    put_key(&v, 2, kFixed32);
    put_fixed(&v, float(value));
    put_bytes(&summary, 1, v);
  }
  std::string e = event_head(wall_time, step);
  put_bytes(&e, 5, summary);
  return framed(e);
}

EventFile::~EventFile() {
  if (file_) std::fclose(file_);
}

Status EventFile::open(double now) {
  LB_RETURN_IF_ERROR(create_parent_directories(dir_ + "/events", "logging.tensorboard_dir"));
  path_ = dir_ + "/events.out.tfevents." + std::to_string(int64_t(now)) + "." + host_name() + "." +
          std::to_string(::getpid()) + ".lansbert";
  file_ = std::fopen(path_.c_str(), "wb");
  if (!file_) return Status::io_error(path_ + ": cannot create the TensorBoard event file: " + std::strerror(errno));
  LB_RETURN_IF_ERROR(append(event_record_file_version(now)));
  if (first_step_ > 1) LB_RETURN_IF_ERROR(append(event_record_session_start(now, first_step_)));
  return Status::ok();
}

Status EventFile::write(int64_t step, const TaggedScalars& scalars) {
  if (dir_.empty()) return Status::ok();
  const double now = now_seconds();
  if (!file_) LB_RETURN_IF_ERROR(open(now));
  return append(event_record_scalars(now, step, scalars));
}

Status EventFile::append(const std::string& record) {
  if (std::fwrite(record.data(), 1, record.size(), file_) != record.size() || std::fflush(file_) != 0)
    return Status::io_error(path_ + ": write failed: " + std::strerror(errno));
  return Status::ok();
}

}  // namespace lansbert
