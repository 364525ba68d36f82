// Running the trainer from a test binary: per-process scratch directories under the build
// tree (needs LANSBERT_BINARY_DIR, defined for the test suites), reading a file whole, and a
// quiet one-process run.
#pragma once

#include <unistd.h>

#include <filesystem>
#include <functional>
#include <string>

#include <gtest/gtest.h>

#include "lansbert/core/file_io.h"
#include "lansbert/dist/communicator.h"
#include "lansbert/train/trainer.h"

namespace lansbert::testing {

// Removes a process's scratch tree when it ends with every test passed, so that runs do not
// pile up trees named by pids (a failure's files stay for a look). Only in the process that
// made it: a forked child's exit must not take the parent's files.
struct ScratchCleanup {
  std::filesystem::path dir;
  pid_t owner = ::getpid();
  ~ScratchCleanup() {
    std::error_code ec;
    if (::getpid() == owner && ::testing::UnitTest::GetInstance()->Passed()) std::filesystem::remove_all(dir, ec);
  }
};

// A fresh directory under the build tree, per process: CTest runs each test case as its own
// process, in parallel, and each one's SetUpTestSuite writes the shared data again.
inline std::string scratch(const std::string& name) {
  namespace fs = std::filesystem;
  const fs::path mine = fs::path(LANSBERT_BINARY_DIR) / "test-scratch" / ("train-" + std::to_string(::getpid()));
  static ScratchCleanup cleanup{mine};
  const fs::path p = mine / name;
  fs::remove_all(p);
  fs::create_directories(p);
  return p.string();
}

inline std::string slurp(const std::string& path) {
  std::string s;
  EXPECT_TRUE(read_file(path, &s).is_ok()) << path;
  return s;
}

// run_training on one process, quietly.
inline Status train(const TrainConfig& c, TrainResult* r, const std::string& resume = "", int64_t stop = -1,
                    std::function<void(int64_t)> hook = nullptr, const std::string& init_from = "") {
  auto comm = make_single_process_communicator();
  TrainOptions o;
  o.resume = resume;
  o.init_from = init_from;
  o.stop_at_step = stop;
  o.log = nullptr;
  o.after_step = std::move(hook);
  return run_training(c, *comm, o, r);
}

}  // namespace lansbert::testing
