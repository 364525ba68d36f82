// A test fixture for the corpus readers (CorpusFile, TextDocumentReader): a scratch
// directory per test, files written into it, and a file's units or documents read back.
#pragma once

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "lansbert/data/corpus_file.h"
#include "lansbert/data/text_reader.h"

namespace lansbert {

class CorpusTestBase : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::temp_directory_path() /
           ("lansbert_corpus_" + std::to_string(::getpid()) + "_" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    std::filesystem::create_directories(dir_);
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }
  std::string write(const std::string& name, const std::string& bytes) {
    const std::string p = (dir_ / name).string();
    std::ofstream(p, std::ios::binary) << bytes;
    return p;
  }
  // Every unit of `path` (and each one's line_no() into *lines), or the error.
  static Status units(const std::string& path, const CorpusOptions& o, std::vector<std::string>* out,
                      std::vector<int64_t>* lines = nullptr) {
    CorpusFile f;
    LB_RETURN_IF_ERROR(f.open(path, o));
    std::string text;
    for (bool got = true;;) {
      LB_RETURN_IF_ERROR(f.next(&text, &got));
      if (!got) return Status::ok();
      out->push_back(text);
      if (lines) lines->push_back(f.line_no());
    }
  }
  // The documents TextDocumentReader makes of `paths`, each a list of sentences; every
  // sentence has its origin, and every byte of the files is counted as read.
  static std::vector<std::vector<std::string>> documents(const std::vector<std::string>& paths,
                                                         const CorpusOptions& options = {}) {
    TextDocumentReader r;
    EXPECT_TRUE(r.open(paths, options).is_ok());
    std::vector<std::vector<std::string>> docs;
    std::vector<std::string> sentences, origins;
    for (bool done = false;;) {
      const Status st = r.next(&sentences, &origins, &done);
      EXPECT_TRUE(st.is_ok()) << st.to_string();
      if (done || !st.is_ok()) break;
      EXPECT_EQ(origins.size(), sentences.size());
      docs.push_back(sentences);
    }
    EXPECT_EQ(r.bytes_read(), r.total_bytes());
    return docs;
  }

  std::filesystem::path dir_;
};

}  // namespace lansbert
