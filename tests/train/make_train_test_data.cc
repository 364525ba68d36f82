// make_train_test_data DIR: writes DIR/vocab.txt and DIR/shards/shard-00000.lbs (the tiny
// learnable corpus of train_test_util.h) for the command-line tests.
#include <cstdio>

#include "train_test_util.h"

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: make_train_test_data DIR\n");
    return 2;
  }
  const std::string glob = lansbert::testing::write_tiny_shards(argv[1]);
  if (glob.empty()) return 1;
  std::printf("%s\n", glob.c_str());
  return 0;
}
