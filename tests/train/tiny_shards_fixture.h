// The fixture of the trainer's end-to-end tests: tiny synthetic shards written once per test
// suite (CTest runs each case as its own process), under that process's scratch tree, which
// goes when the suite ends.
#pragma once

#include <omp.h>

#include <filesystem>
#include <string>

#include <gtest/gtest.h>

#include "train_run_util.h"
#include "train_test_util.h"

namespace lansbert::testing {

class TinyShardsTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    omp_set_num_threads(1);  // tiny matrices: threads only cost, badly on a loaded machine
    data_ = new std::string(scratch("data"));
    ASSERT_FALSE(write_tiny_shards(*data_).empty());
  }
  static void TearDownTestSuite() {
    std::filesystem::remove_all(std::filesystem::path(*data_).parent_path());  // this process's scratch tree
    delete data_;
    data_ = nullptr;
  }
  // The shards' directory: shards/*.lbs and the vocab (write_tiny_shards).
  inline static std::string* data_ = nullptr;
};

}  // namespace lansbert::testing
