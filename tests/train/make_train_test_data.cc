// make_train_test_data DIR [SEQ_LEN MAX_PRED [DOCUMENTS [same]]]: writes DIR/vocab.txt and
// DIR/shards/shard-00000.lbs (the tiny learnable corpus of train_test_util.h; default 32/5,
// 300 documents; `same`: every sample a copy of the first, a data set without gradient noise)
// for the command-line tests and the `lansbert train` step-time measurements.
#include <cstdio>
#include <cstdlib>
#include <string>

#include "train_test_util.h"

int main(int argc, char** argv) {
  // An option-looking DIR (--help) is a request for the usage, not a directory to create.
  if ((argc < 2 || argc == 3 || argc > 6) || argv[1][0] == '-' || (argc == 6 && std::string(argv[5]) != "same")) {
    std::fprintf(stderr, "usage: make_train_test_data DIR [SEQ_LEN MAX_PRED [DOCUMENTS [same]]]\n"
                         "  same: every sample a copy of the first\n");
    return 2;
  }
  const int seq_len = argc >= 4 ? std::atoi(argv[2]) : 32, max_pred = argc >= 4 ? std::atoi(argv[3]) : 5;
  const int documents = argc >= 5 ? std::atoi(argv[4]) : 300;
  const std::string glob =
      lansbert::testing::write_tiny_shards(argv[1], documents, seq_len, max_pred, 7, false, /*repeat_first=*/argc == 6);
  if (glob.empty()) return 1;
  std::printf("%s\n", glob.c_str());
  return 0;
}
