// The work of building an instance is bounded by the instance, not by the sentences it is
// cut from: a whole book on one line once made prep quadratic, because A and B were copied
// whole and then truncated by erasing at the front of a vector, one token at a time. The
// test measures work without a clock: it counts the bytes allocated while the instances
// of a document with one very long sentence are made. Copying that sentence (the first
// step of the quadratic way) would allocate at least its size.
#include <gtest/gtest.h>

#include <atomic>
#include <cstdlib>
#include <new>

#include "lansbert/data/instances.h"
#include "test_util.h"

namespace {
std::atomic<int64_t> g_allocated{0};
}  // namespace

// Counting replacements of the global allocation functions, for this test executable.
void* operator new(std::size_t n) {
  g_allocated.fetch_add(static_cast<int64_t>(n), std::memory_order_relaxed);
  if (void* p = std::malloc(n == 0 ? 1 : n)) return p;
  throw std::bad_alloc();
}
void operator delete(void* p) noexcept { std::free(p); }
void operator delete(void* p, std::size_t) noexcept { std::free(p); }

namespace lansbert {
namespace {

TEST(InstanceCost, LongSentenceCopiesOnlyWhatItKeeps) {
  // Document 0: one sentence of 200k tokens. Document 1: short sentences, so its random
  // next sentences come from document 0 (the only other document).
  constexpr int64_t kLong = 200000;
  std::vector<Document> block(2);
  block[0].emplace_back(kLong);
  for (int64_t i = 0; i < kLong; ++i) block[0][0][i] = 1000 + static_cast<int32_t>(i % 20000);
  for (int s = 0; s < 400; ++s) block[1].push_back({2000 + s, 2001 + s, 2002 + s, 2003 + s});
  InstanceOptions opts;  // seq len 128
  const MaskingVocab vocab = testing::test_vocab();
  for (size_t d = 0; d < block.size(); ++d) {
    for (int pass = 0; pass < 3; ++pass) {
      std::vector<Instance> out;
      out.reserve(64);
      const int64_t before = g_allocated.load();
      create_instances_from_document(block, 0, d, pass, opts, vocab, &out);
      const int64_t bytes = g_allocated.load() - before;
      ASSERT_FALSE(out.empty());
      // Each instance holds at most 128 tokens and 20 masked slots; a few KB covers it and
      // the temporaries. The long sentence alone is 800 KB.
      EXPECT_LT(bytes, static_cast<int64_t>(out.size()) * 8192) << "document " << d << " pass " << pass;
      for (const Instance& inst : out) ASSERT_LE(inst.tokens.size(), 128u);
    }
  }
}

// A random next sentence that lands on the long line reads only its first
// kRandomNextReadFactor x seq_len tokens, so its truncation costs that many draws, not the
// line's length, however many instances of the block draw it.
TEST(InstanceCost, RandomNextReadsABoundedPartOfALongSentence) {
  constexpr int64_t kLong = 200000;
  std::vector<Document> block(2);
  block[0].emplace_back(kLong);
  for (int64_t i = 0; i < kLong; ++i) block[0][0][i] = 1000 + static_cast<int32_t>(i);  // id = 1000 + position
  for (int s = 0; s < 400; ++s) block[1].push_back({500 + s % 300, 501, 502, 503});
  InstanceOptions opts;
  opts.dynamic_masking = true;  // ids stay as written
  const int64_t cap = int64_t(kRandomNextReadFactor) * opts.max_seq_len;
  int random_next = 0;
  for (int pass = 0; pass < 5; ++pass) {
    std::vector<Instance> out;
    create_instances_from_document(block, 0, 1, pass, opts, testing::test_vocab(), &out);
    for (const Instance& inst : out) {
      if (!inst.is_random_next) continue;
      ++random_next;
      for (size_t p = inst.a_end + 1; p + 1 < inst.tokens.size(); ++p) {
        ASSERT_GE(inst.tokens[p], 1000);
        ASSERT_LT(inst.tokens[p] - 1000, cap) << "B read position " << inst.tokens[p] - 1000;
      }
    }
  }
  EXPECT_GT(random_next, 10);
}

}  // namespace
}  // namespace lansbert
