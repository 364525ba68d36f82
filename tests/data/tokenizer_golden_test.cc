// Golden tests: every line of tests/data/golden/tokenizer_*.jsonl, written by Hugging Face
// tokenizers (scripts/make-tokenizer-golden.py), must give exactly the same ids.
#include <gtest/gtest.h>

#include <fstream>
#include <nlohmann/json.hpp>

#include "lansbert/data/tokenizer.h"
#include "test_paths.h"

namespace lansbert {
namespace {

void check_golden(const std::string& file, bool lower_case) {
  Vocab vocab;
  ASSERT_TRUE(Vocab::load(testing::vocab_path(), &vocab).is_ok());
  TokenizerOptions opts;
  opts.lower_case = lower_case;
  BertTokenizer tok(vocab, opts);
  std::ifstream in(testing::data_path("golden/" + file));
  ASSERT_TRUE(in) << file;
  std::string line;
  int n = 0, bad = 0;
  while (std::getline(in, line)) {
    const auto j = nlohmann::json::parse(line);
    const std::string text = j.at("text").get<std::string>();
    const auto want = j.at("ids").get<std::vector<int32_t>>();
    std::vector<int32_t> got;
    ASSERT_TRUE(tok.encode(text, &got).is_ok()) << "line " << n + 1;
    if (got != want && ++bad <= 10) {
      ADD_FAILURE() << file << " line " << n + 1 << ": " << j.at("text").dump();
    }
    ++n;
  }
  EXPECT_GE(n, 300);
  EXPECT_EQ(bad, 0) << bad << " of " << n << " lines differ";
}

TEST(TokenizerGolden, UncasedMatchesHuggingFace) {
  check_golden("tokenizer_uncased.jsonl", true);
}
TEST(TokenizerGolden, CasedMatchesHuggingFace) {
  check_golden("tokenizer_cased.jsonl", false);
}

}  // namespace
}  // namespace lansbert
