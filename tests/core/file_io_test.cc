// read_file_in_chunks: every byte once, in order, in pieces no larger than asked, for sizes
// around the piece size (an empty file included); errors name the path; a FIFO is refused.
#include "lansbert/core/file_io.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <future>

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

// A FIFO given as a file (a vocab, a config) is refused at once: opening it for reading must
// not wait for a writer that never comes.
TEST(FileIo, AFifoIsRefusedWithoutWaitingForAWriter) {
  const fs::path path = fs::temp_directory_path() / ("lansbert_fifo_" + std::to_string(::getpid()));
  fs::remove(path);
  ASSERT_EQ(::mkfifo(path.c_str(), 0600), 0);
  auto read = std::async(std::launch::async, [&] {
    std::string data;
    return read_file(path.string(), &data);
  });
  if (read.wait_for(std::chrono::seconds(20)) != std::future_status::ready) {
    ADD_FAILURE() << "read_file of a FIFO still waits after 20 s";
    const int w = ::open(path.c_str(), O_WRONLY);  // the writer it waits for, so the test ends
    if (w >= 0) ::close(w);
  }
  const Status st = read.get();
  EXPECT_NE(st.message().find(path.string() + ": not a regular file"), std::string::npos) << st.message();
  fs::remove(path);
}

}  // namespace
}  // namespace lansbert
