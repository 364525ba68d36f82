// Vocab loading: the standard file, and each way a file can be wrong.
#include "lansbert/data/vocab.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <future>

#include "test_paths.h"

namespace lansbert {
namespace {

std::string write_temp(const std::string& name, const std::string& content) {
  const auto path = std::filesystem::temp_directory_path() / ("lansbert_vocab_" + name);
  std::ofstream(path, std::ios::binary) << content;
  return path.string();
}

TEST(Vocab, LoadsBertBaseUncased) {
  Vocab v;
  ASSERT_TRUE(Vocab::load(testing::vocab_path(), &v).is_ok());
  EXPECT_EQ(v.size(), 30522);
  EXPECT_EQ(v.pad_id(), 0);
  EXPECT_EQ(v.unk_id(), 100);
  EXPECT_EQ(v.cls_id(), 101);
  EXPECT_EQ(v.sep_id(), 102);
  EXPECT_EQ(v.mask_id(), 103);
  EXPECT_EQ(v.find("the"), 1996);
  EXPECT_EQ(v.find("##ing"), 2075);
  EXPECT_EQ(v.find("not-a-token"), -1);
  EXPECT_EQ(v.token(7592), "hello");
}

TEST(Vocab, ContinuationFlagsMarkWordPieceSuffixes) {
  Vocab v;
  ASSERT_TRUE(Vocab::from_tokens({"[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "##ing", "play", "#", "#x", "##"}, &v).is_ok());
  EXPECT_EQ(v.continuation_flags(), (std::vector<bool>{false, false, false, false, false, true, false, false, false, true}));
}

TEST(Vocab, HashIsFnv1aOfTokensAndNewlines) {
  Vocab v;
  ASSERT_TRUE(Vocab::from_tokens({"[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"}, &v).is_ok());
  uint64_t h = 0xcbf29ce484222325ULL;
  for (unsigned char c : std::string("[PAD]\n[UNK]\n[CLS]\n[SEP]\n[MASK]\n")) {
    h = (h ^ c) * 0x100000001b3ULL;
  }
  EXPECT_EQ(v.hash(), h);
  // The same tokens from a file with CRLF line ends hash the same.
  Vocab f;
  ASSERT_TRUE(
      Vocab::load(write_temp("crlf.txt", "[PAD]\r\n[UNK]\r\n[CLS]\r\n[SEP]\r\n[MASK]\r\n"), &f)
          .is_ok());
  EXPECT_EQ(f.hash(), h);
}

TEST(Vocab, MissingFileIsNotFound) {
  Vocab v;
  Status s = Vocab::load("/nonexistent/vocab.txt", &v);
  EXPECT_EQ(s.code(), StatusCode::kNotFound);
  EXPECT_NE(s.message().find("/nonexistent/vocab.txt"), std::string::npos);
}

// A FIFO where the vocab should be is refused at once: opening it for reading would wait for a
// writer that never comes.
TEST(Vocab, AFifoIsRefusedWithoutWaitingForAWriter) {
  const std::filesystem::path path =
      std::filesystem::temp_directory_path() / ("lansbert_vocab_fifo_" + std::to_string(::getpid()));
  std::filesystem::remove(path);
  ASSERT_EQ(::mkfifo(path.c_str(), 0600), 0);
  auto load = std::async(std::launch::async, [&] {
    Vocab v;
    return Vocab::load(path.string(), &v);
  });
  if (load.wait_for(std::chrono::seconds(20)) != std::future_status::ready) {
    ADD_FAILURE() << "Vocab::load of a FIFO still waits after 20 s";
    const int w = ::open(path.c_str(), O_WRONLY);  // the writer it waits for, so the test ends
    if (w >= 0) ::close(w);
  }
  const Status st = load.get();
  EXPECT_NE(st.message().find(path.string() + ": not a regular file"), std::string::npos) << st.message();
  std::filesystem::remove(path);
}

TEST(Vocab, EmptyFileIsCorrupt) {
  Vocab v;
  EXPECT_EQ(Vocab::load(write_temp("empty.txt", ""), &v).code(), StatusCode::kCorrupt);
}

TEST(Vocab, DuplicateTokenNamesBothLines) {
  Vocab v;
  Status s =
      Vocab::load(write_temp("dup.txt", "[PAD]\n[UNK]\nfoo\n[CLS]\n[SEP]\n[MASK]\nfoo\n"), &v);
  EXPECT_EQ(s.code(), StatusCode::kCorrupt);
  EXPECT_NE(s.message().find(":7: duplicate token 'foo' (first on line 3)"), std::string::npos)
      << s.message();
}

TEST(Vocab, MissingSpecialTokenIsNamed) {
  Vocab v;
  Status s = Vocab::load(write_temp("nomask.txt", "[PAD]\n[UNK]\n[CLS]\n[SEP]\nfoo\n"), &v);
  EXPECT_EQ(s.code(), StatusCode::kCorrupt);
  EXPECT_NE(s.message().find("[MASK]"), std::string::npos) << s.message();
  EXPECT_FALSE(Vocab::from_tokens({"[PAD]", "[CLS]", "[SEP]", "[MASK]"}, &v).is_ok());
}

TEST(Vocab, EmptyLineIsCorrupt) {
  Vocab v;
  Status s = Vocab::load(write_temp("blank.txt", "[PAD]\n\n[UNK]\n[CLS]\n[SEP]\n[MASK]\n"), &v);
  EXPECT_EQ(s.code(), StatusCode::kCorrupt);
  EXPECT_NE(s.message().find(":2: empty token"), std::string::npos) << s.message();
}

TEST(Vocab, ByteOrderMarkIsNamed) {
  Vocab v;
  const std::string path = write_temp("bom.txt", "\xEF\xBB\xBF[PAD]\n[UNK]\n[CLS]\n[SEP]\n[MASK]\n");
  Status s = Vocab::load(path, &v);
  EXPECT_EQ(s.code(), StatusCode::kCorrupt);
  EXPECT_NE(s.message().find(path + ":1: starts with a UTF-8 byte-order mark"), std::string::npos) << s.message();
}

// Hugging Face fails on a vocab.txt that is not UTF-8; a NUL byte means a binary file was
// given. Each is named by line and column; valid multi-byte tokens load.
TEST(Vocab, InvalidUtf8AndNulBytesAreNamed) {
  const std::string head = "[PAD]\n[UNK]\n[CLS]\n[SEP]\n[MASK]\n";
  Vocab v;
  ASSERT_TRUE(Vocab::load(write_temp("utf8.txt", head + "caf\xC3\xA9\n##\xE4\xB8\xAD\n\xF0\x9F\x98\x80\n"), &v)
                  .is_ok());
  EXPECT_EQ(v.find("caf\xC3\xA9"), 5);
  const struct {
    std::string line, says;
  } bad[] = {
      {"caf\xE9", ":6: column 4: invalid UTF-8 (truncated sequence)"},
      {"ab\xC0\xAF", ":6: column 3: invalid UTF-8 (overlong encoding)"},
      {"\xED\xA0\x80", ":6: column 1: invalid UTF-8 (surrogate code point)"},
      {"x\x80", ":6: column 2: invalid UTF-8 (unexpected continuation byte)"},
      {std::string("ab\0c", 4), ":6: column 3: NUL byte"},
  };
  for (const auto& b : bad) {
    const std::string path = write_temp("bad_bytes.txt", head + b.line + "\n");
    const Status s = Vocab::load(path, &v);
    EXPECT_EQ(s.code(), StatusCode::kCorrupt);
    EXPECT_NE(s.message().find(path + b.says), std::string::npos) << s.message();
  }
}

}  // namespace
}  // namespace lansbert
