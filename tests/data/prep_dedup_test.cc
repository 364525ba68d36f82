// prep --dedup: a document whose tokens and sentence boundaries repeat an earlier one's is
// dropped as if the input had not held it (the shards equal those of the input without it,
// byte for byte), across blocks and files; a copy that differs only in spaces is a duplicate,
// one with other line breaks is not. SeenDocuments, the hash set behind it, keeps every hash
// through its growth.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <iterator>

#include "../../src/data/seen_documents.h"
#include "lansbert/core/philox.h"
#include "lansbert/data/prep.h"
#include "test_util.h"

namespace lansbert {
namespace {

// Word -> id by FNV-1a (test_util.h).
Status word_tokenize(std::string_view text, std::vector<int32_t>* ids) { return testing::hash_tokenize(text, ids); }

// Document d as text lines (one sentence each), ended by a blank line.
std::string document(int d) {
  std::string text;
  for (int s = 0; s < 3 + d % 5; ++s) {
    text += "Sentence " + std::to_string(s) + " of document " + std::to_string(d) + " is about topic " +
            std::to_string((d * 7 + s) % 23) + " and more.\n";
  }
  return text + "\n";
}

void write(const std::string& path, const std::string& text) { std::ofstream(path, std::ios::binary) << text; }

std::string slurp(const std::string& p) {
  std::ifstream f(p, std::ios::binary);
  return {std::istreambuf_iterator<char>(f), {}};
}

PrepStats prep(std::vector<std::string> inputs, const std::string& out, bool dedup, size_t block_bytes) {
  PrepOptions o;
  o.inputs = std::move(inputs);
  o.out_dir = out;
  o.dedup = dedup;
  o.block_bytes = block_bytes;
  o.instances.dupe_factor = 2;
  PrepStats st;
  const Status s = run_prep(o, {}, testing::test_vocab(), word_tokenize, &st);
  EXPECT_TRUE(s.is_ok()) << s.to_string();
  return st;
}

TEST(PrepDedup, DuplicatesAreDroppedAsIfNeverThere) {
  const std::string dir = testing::scratch_dir("prep_dedup");
  std::string with, without;
  for (int d = 0; d < 120; ++d) {
    with += document(d);
    without += document(d);
    if (d == 60) with += document(5) + document(60);  // earlier in the block, and right before
    if (d == 90) {
      std::string spaced;  // the same words, other spaces: a duplicate
      for (const char c : document(30)) spaced += c == ' ' ? std::string("   ") : std::string(1, c);
      with += spaced;
      std::string rebroken = document(40);  // the same words, other sentence boundaries: not one
      rebroken[rebroken.find(" is about")] = '\n';
      with += rebroken;
      without += rebroken;
    }
  }
  with += document(119);
  write(dir + "/with.txt", with);
  write(dir + "/without.txt", without);

  const PrepStats deduped = prep({dir + "/with.txt"}, dir + "/deduped", true, 1 << 20);  // one block
  const PrepStats clean = prep({dir + "/without.txt"}, dir + "/clean", false, 1 << 20);
  EXPECT_EQ(deduped.duplicates, 4);
  EXPECT_EQ(deduped.documents, 121);
  EXPECT_EQ(deduped.documents, clean.documents);
  EXPECT_EQ(deduped.sentences, clean.sentences);
  EXPECT_EQ(deduped.tokens, clean.tokens);
  EXPECT_EQ(deduped.instances, clean.instances);
  ASSERT_FALSE(slurp(dir + "/clean/shard-00000.lbs").empty());
  EXPECT_TRUE(slurp(dir + "/deduped/shard-00000.lbs") == slurp(dir + "/clean/shard-00000.lbs"));

  // Without --dedup the copies are read as documents of their own.
  const PrepStats kept = prep({dir + "/with.txt"}, dir + "/kept", false, 1 << 20);
  EXPECT_EQ(kept.duplicates, 0);
  EXPECT_EQ(kept.documents, 125);
  EXPECT_FALSE(slurp(dir + "/kept/shard-00000.lbs") == slurp(dir + "/clean/shard-00000.lbs"));

  // Across blocks and files: the copy in the second file, many blocks after its original.
  write(dir + "/second.txt", document(3) + document(500) + document(119));
  const PrepStats across = prep({dir + "/with.txt", dir + "/second.txt"}, dir + "/across", true, 2000);
  EXPECT_EQ(across.duplicates, 6);
  EXPECT_EQ(across.documents, 122);
}

TEST(PrepDedup, SeenDocumentsKeepsEveryHashThroughGrowth) {
  SeenDocuments seen;
  uint64_t e = 0;
  std::vector<uint64_t> hashes;
  for (int i = 0; i < 100000; ++i) {  // distinct: a random high half, the index as the low half
    hashes.push_back(uint64_t(philox_bits(RngKey{3, 0, 0}, e++)) << 32 | uint64_t(i + 1));
  }
  hashes.push_back(0);  // the free-slot marker is a hash too
  EXPECT_FALSE(seen.contains(hashes[0]));  // an empty set holds nothing
  for (const uint64_t h : hashes) EXPECT_TRUE(seen.insert(h));
  for (const uint64_t h : hashes) EXPECT_TRUE(seen.contains(h));
  EXPECT_FALSE(seen.contains(uint64_t(7) << 32 | 200001));  // low half past every index
  EXPECT_EQ(seen.size(), hashes.size());
  for (const uint64_t h : hashes) EXPECT_FALSE(seen.insert(h));
  EXPECT_EQ(seen.size(), hashes.size());
  EXPECT_LE(seen.bytes(), 32 * hashes.size());  // at most half full after growing
  // Hashes equal in their low bits (one slot) probe on to free ones.
  SeenDocuments same_slot;
  for (uint64_t k = 1; k <= 5000; ++k) EXPECT_TRUE(same_slot.insert(k << 32));
  for (uint64_t k = 1; k <= 5000; ++k) EXPECT_FALSE(same_slot.insert(k << 32));
  EXPECT_FALSE(same_slot.contains(uint64_t(5001) << 32));  // probes past the run to a free slot
}

}  // namespace
}  // namespace lansbert
