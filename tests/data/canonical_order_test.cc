// canonical_order (NFD's reordering of combining marks): the same result as inserting each
// mark into place, and a number of class lookups that grows as n log n, not n^2, on one
// long run of marks; the tokenizer keeps its answer on such a run.
#include "../../src/data/canonical_order.h"

#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "lansbert/core/philox.h"
#include "lansbert/data/tokenizer.h"
#include "test_paths.h"

namespace lansbert {
namespace {

// A stand-in class table: 0 for "starters" (below 100), else 200 + cp % 5.
int fake_ccc(int32_t cp) { return cp < 100 ? 0 : 200 + cp % 5; }

// The definition, as WordScanner did it: insert each code point after the last one
// whose class is not greater (stopping at a starter).
std::vector<int32_t> by_insertion(const std::vector<int32_t>& in) {
  std::vector<int32_t> out;
  for (int32_t cp : in) {
    size_t at = out.size();
    if (fake_ccc(cp) != 0) {
      while (at > 0 && fake_ccc(out[at - 1]) > fake_ccc(cp)) --at;
    }
    out.insert(out.begin() + static_cast<std::ptrdiff_t>(at), cp);
  }
  return out;
}

TEST(CanonicalOrder, SameAsInsertingEachMark) {
  uint64_t e = 0;
  auto draw = [&](uint32_t m) { return philox_bits(RngKey{11, 0, 0}, e++) % m; };
  for (int trial = 0; trial < 300; ++trial) {
    // Runs of 0..40 marks between starters: both the insertion and the sort branch.
    std::vector<int32_t> cps(draw(200));
    const uint32_t starter_odds = 2 + draw(40);
    for (auto& cp : cps) cp = draw(starter_odds) == 0 ? static_cast<int32_t>(draw(100)) : 100 + static_cast<int32_t>(draw(1000));
    std::vector<int32_t> got = cps;
    canonical_order(got.data(), got.size(), fake_ccc);
    ASSERT_EQ(got, by_insertion(cps)) << "trial " << trial;
  }
}

TEST(CanonicalOrder, LookupsGrowAsNLogN) {
  // One run of 2^16 marks whose classes alternate 204, 203, ...: inserting each mark
  // into place looks up about n^2 / 8 = 5e8 classes.
  const size_t n = size_t(1) << 16;
  std::vector<int32_t> cps(n + 1);
  cps[0] = 7;  // a starter
  for (size_t i = 1; i <= n; ++i) cps[i] = i % 2 ? 104 : 103;
  int64_t lookups = 0;
  canonical_order(cps.data(), cps.size(), [&](int32_t cp) {
    ++lookups;
    return fake_ccc(cp);
  });
  EXPECT_LE(lookups, static_cast<int64_t>(n * (2 * 16 + 2)));
  EXPECT_EQ(cps[1], 103);
  EXPECT_EQ(cps[n / 2], 103);
  EXPECT_EQ(cps[n / 2 + 1], 104);
}

TEST(CanonicalOrder, TokenizerOnALongRunOfMarks) {
  Vocab vocab;
  ASSERT_TRUE(Vocab::load(testing::vocab_path(), &vocab).is_ok());
  const BertTokenizer tok(vocab);
  // "a" with 40000 stacked marks (U+0301 class 230, U+0316 class 220), then " b": the
  // marks are stripped (uncased), leaving "a b".
  std::string text = "a";
  for (int i = 0; i < 20000; ++i) text += "\xCC\x81\xCC\x96";
  text += " b";
  std::vector<std::string> pieces;
  ASSERT_TRUE(tok.encode_tokens(text, &pieces).is_ok());
  EXPECT_EQ(pieces, (std::vector<std::string>{"a", "b"}));
}

}  // namespace
}  // namespace lansbert
