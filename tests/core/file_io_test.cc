// read_file_in_chunks: every byte once, in order, in pieces no larger than asked, for sizes
// around the piece size (an empty file included); errors name the path.
#include "lansbert/core/file_io.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>

namespace lansbert {
namespace {

namespace fs = std::filesystem;

TEST(FileIo, ReadInChunksHandsOverEveryByteInOrder) {
  const fs::path path = fs::temp_directory_path() / ("lansbert_file_io_" + std::to_string(::getpid()));
  for (size_t size : {0, 1, 6, 7, 8, 13, 14, 15, 100}) {
    std::string bytes(size, '\0');
    for (size_t i = 0; i < size; ++i) bytes[i] = char(i * 37 + 11);
    std::ofstream(path, std::ios::binary | std::ios::trunc) << bytes;
    std::string got;
    size_t pieces = 0, largest = 0, total = 12345;
    ASSERT_TRUE(read_file_in_chunks(
                    path.string(), 7,
                    [&](const char* p, size_t n) {
                      got.append(p, n);
                      ++pieces;
                      largest = std::max(largest, n);
                    },
                    &total)
                    .is_ok());
    EXPECT_EQ(got, bytes) << size;
    EXPECT_EQ(total, size);
    EXPECT_EQ(pieces, (size + 6) / 7) << size;
    EXPECT_LE(largest, size_t(7));
  }
  fs::remove(path);
  size_t total = 0;
  const Status st = read_file_in_chunks(path.string(), 7, [](const char*, size_t) {}, &total);
  EXPECT_EQ(st.code(), StatusCode::kNotFound);
  EXPECT_NE(st.message().find(path.string()), std::string::npos) << st.message();
  const Status dir = read_file_in_chunks(fs::temp_directory_path().string(), 7, [](const char*, size_t) {}, &total);
  EXPECT_NE(dir.message().find("not a regular file"), std::string::npos) << dir.message();
}

}  // namespace
}  // namespace lansbert
