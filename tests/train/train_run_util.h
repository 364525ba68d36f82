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

// A fresh directory under the build tree, per process: CTest runs each test case as its own
// process, in parallel, and each one's SetUpTestSuite writes the shared data again.
inline std::string scratch(const std::string& name) {
  namespace fs = std::filesystem;
  const fs::path p = fs::path(LANSBERT_BINARY_DIR) / "test-scratch" / ("train-" + std::to_string(::getpid())) / name;
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
