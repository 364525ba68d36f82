// TensorBoard event files: the records against the bytes TensorBoard's own protocol buffer
// classes and record writer give for the same events (tests/python/tensorboard_golden.py
// prints them), and EventFile's file: its name, its first records, nothing for an empty
// directory, an error naming the path where it cannot be created.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "lansbert/train/tensorboard_events.h"

namespace lansbert {
namespace {

namespace fs = std::filesystem;

std::string hex(const std::string& bytes) {
  static const char* digits = "0123456789abcdef";
  std::string out;
  for (unsigned char c : bytes) out += {digits[c >> 4], digits[c & 15]};
  return out;
}

TEST(TensorBoardEvents, RecordsAreTheReferenceBytes) {
  EXPECT_EQ(hex(event_record_file_version(1.5)),
            "1800000000000000a37f4b2209000000000000f83f1a0d627261696e2e4576656e743a322a28646c");
  EXPECT_EQ(hex(event_record_session_start(2.25, 7)),
            "0f000000000000006d532b0909000000000000024010073a020801e08cca7e");
  EXPECT_EQ(hex(event_record_scalars(1700000000.5, 42, {{"train/loss", 7.25}, {"eval/mlm_accuracy", -0.5}})),
            "3a000000000000001295eae20900002040fc54d941102a2a2d0a110a0a747261696e2f6c6f7373150000e8400a180a1165"
            "76616c2f6d6c6d5f616363757261637915000000bf3fadc415");
  // A step of three varint bytes, and a value rounded to float as simple_value holds it.
  EXPECT_EQ(hex(event_record_scalars(3.0, 300000, {{"speed/tokens_per_s", 123456.789}})),
            "2a00000000000000ae8d91f509000000000000084010e0a7122a1b0a190a1273706565642f746f6b656e735f7065725f73"
            "156520f14749c28b05");
}

std::string read_all(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string((std::istreambuf_iterator<char>(in)), {});
}

// The data of each record, the framing checked by length (the checksums are the golden test's).
std::vector<std::string> records(const std::string& file) {
  std::vector<std::string> out;
  for (size_t at = 0; at + 12 <= file.size();) {
    uint64_t n = 0;
    std::memcpy(&n, file.data() + at, 8);
    EXPECT_LE(at + 12 + n + 4, file.size());
    out.push_back(file.substr(at + 12, n));
    at += 12 + n + 4;
  }
  return out;
}

TEST(TensorBoardEvents, EventFileStartsWithItsVersionAndOnResumeASessionStart) {
  const fs::path dir = fs::temp_directory_path() / ("lansbert_tb_" + std::to_string(::getpid()));
  fs::remove_all(dir);
  for (const int64_t first_step : {1, 301}) {
    EventFile events((dir / std::to_string(first_step)).string(), first_step);
    EXPECT_FALSE(fs::exists(dir / std::to_string(first_step)));  // nothing before the first write
    ASSERT_TRUE(events.write(first_step, {{"train/loss", 2.5}}).is_ok());
    ASSERT_TRUE(events.write(first_step + 1, {{"train/loss", 2.25}}).is_ok());
    const std::string name = fs::path(events.path()).filename().string();
    EXPECT_EQ(name.rfind("events.out.tfevents.", 0), 0u) << name;
    EXPECT_EQ(fs::path(events.path()).parent_path(), dir / std::to_string(first_step));
    const std::vector<std::string> r = records(read_all(events.path()));
    ASSERT_EQ(r.size(), first_step > 1 ? 4u : 3u);
    EXPECT_NE(r[0].find("brain.Event:2"), std::string::npos);
    if (first_step > 1) {
      EXPECT_EQ(r[1].substr(9), "\x10\xad\x02\x3a\x02\x08\x01");  // step 301, START
    }
    EXPECT_NE(r.back().find("train/loss"), std::string::npos);
  }
  EventFile none("", 1);
  EXPECT_TRUE(none.write(1, {{"train/loss", 1}}).is_ok());
  EXPECT_EQ(none.path(), "");
  // A directory that cannot be made: an error naming the field and the path.
  std::ofstream(dir / "file") << "x";
  EventFile blocked((dir / "file" / "tb").string(), 1);
  const Status st = blocked.write(1, {{"train/loss", 1}});
  EXPECT_FALSE(st.is_ok());
  EXPECT_NE(st.message().find("logging.tensorboard_dir"), std::string::npos) << st.message();
  fs::remove_all(dir);
}

}  // namespace
}  // namespace lansbert
