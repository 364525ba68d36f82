// prep --dedup (and, at the end, --near-dedup through run_prep: near copies anywhere in the
// input leave the shards of the input without them; near_duplicates_test.cc tests the
// algorithm). --dedup: a document whose tokens and sentence boundaries repeat an earlier one's is
// dropped as if the input had not held it (the shards equal those of the input without it,
// byte for byte), across blocks and files; a copy that differs only in spaces is a duplicate,
// one with other line breaks is not. SeenDocuments, the hash set behind it, keeps every hash
// through its growth.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <functional>
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

// run_prep of `inputs` into `out` in blocks of block_bytes, with the options `set` gives.
PrepStats prep(std::vector<std::string> inputs, const std::string& out, size_t block_bytes,
               const std::function<void(PrepOptions&)>& set) {
  PrepOptions o;
  o.inputs = std::move(inputs);
  o.out_dir = out;
  o.block_bytes = block_bytes;
  set(o);
  PrepStats st;
  const Status s = run_prep(o, {}, testing::test_vocab(), word_tokenize, &st);
  EXPECT_TRUE(s.is_ok()) << s.to_string();
  return st;
}

// --dedup's runs: two passes.
PrepStats prep(std::vector<std::string> inputs, const std::string& out, bool dedup, size_t block_bytes) {
  return prep(std::move(inputs), out, block_bytes, [dedup](PrepOptions& o) {
    o.dedup = dedup;
    o.instances.dupe_factor = 2;
  });
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

// A longer document than document(d): a copy with one word changed stays near at 0.8.
std::string long_document(int d) {
  std::string text;
  for (int s = 0; s < 8 + d % 5; ++s) {
    text += "Sentence " + std::to_string(s) + " of document " + std::to_string(d) + " says word" +
            std::to_string(d * 31 + s) + " then word" + std::to_string(d * 37 + s * 3) + " and word" +
            std::to_string(d * 41 + s * 5) + " before it ends here.\n";
  }
  return text + "\n";
}

// Through run_prep: near copies anywhere in the input (other blocks and files) leave the
// shards of the input without them, byte for byte in one block; with --dedup both counts.
TEST(NearDedup, PrepDropsNearCopiesAsIfNeverThere) {
  const std::string dir = testing::scratch_dir("prep_near_dedup");
  const auto near_08 = [](PrepOptions& o) { o.near_dedup = 0.8; };
  const auto plain = [](PrepOptions&) {};
  const auto held_out_to = [](const std::string& held, double near) {
    return [held, near](PrepOptions& o) {
      o.near_dedup = near;
      o.heldout_dir = held;
      o.heldout_fraction = 0.2;
    };
  };
  std::string with, without;
  for (int d = 0; d < 100; ++d) {
    with += long_document(d);
    without += long_document(d);
    if (d == 50) {
      std::string edited = long_document(10);  // one word changed
      edited.replace(edited.find("says"), 4, "tells");
      with += edited;
      std::string footer = long_document(20);  // a line more before its blank line
      footer.insert(footer.size() - 1, "One more sentence at its end.\n");
      with += footer;
      with += long_document(30);  // an exact copy
    }
  }
  std::ofstream(dir + "/with.txt") << with;
  std::ofstream(dir + "/without.txt") << without;
  const PrepStats near = prep({dir + "/with.txt"}, dir + "/near", 1 << 20, near_08);
  const PrepStats clean = prep({dir + "/without.txt"}, dir + "/clean", 1 << 20, plain);
  EXPECT_EQ(near.near_duplicates, 3);
  EXPECT_EQ(near.documents, 100);
  EXPECT_EQ(near.near_dedup_bands, 10);
  EXPECT_EQ(near.near_dedup_rows, 12);
  EXPECT_GT(near.near_dedup_bytes, 0u);
  EXPECT_EQ(clean.near_duplicates, 0);
  EXPECT_EQ(clean.near_dedup_bytes, 0u);
  ASSERT_FALSE(slurp(dir + "/clean/shard-00000.lbs").empty());
  EXPECT_TRUE(slurp(dir + "/near/shard-00000.lbs") == slurp(dir + "/clean/shard-00000.lbs"));
  // With a held-out set: the same split of the same documents, so a near copy of a held-out
  // document is not trained on (nor one of a training document held out).
  const PrepStats near_split = prep({dir + "/with.txt"}, dir + "/near-train", 1 << 20, held_out_to(dir + "/near-held", 0.8));
  const PrepStats clean_split = prep({dir + "/without.txt"}, dir + "/clean-train", 1 << 20, held_out_to(dir + "/clean-held", 0));
  EXPECT_EQ(near_split.heldout_documents, clean_split.heldout_documents);
  EXPECT_GT(clean_split.heldout_documents, 10);
  const auto held_out = [](int d) {  // document d as prep reads it: a sentence per line
    Document doc;
    std::string text = long_document(d);
    for (size_t at = 0, end; (end = text.find('\n', at)) != std::string::npos && end > at; at = end + 1) {
      doc.emplace_back();
      EXPECT_TRUE(word_tokenize(std::string_view(text).substr(at, end - at), &doc.back()).is_ok());
    }
    return heldout_document(doc, 0.2);
  };
  EXPECT_TRUE(held_out(10) || held_out(20) || held_out(30));  // a held-out document has a near copy
  EXPECT_FALSE(held_out(10) && held_out(20) && held_out(30));  // and a training one
  EXPECT_TRUE(slurp(dir + "/near-train/shard-00000.lbs") == slurp(dir + "/clean-train/shard-00000.lbs"));
  ASSERT_FALSE(slurp(dir + "/clean-held/shard-00000.lbs").empty());
  EXPECT_TRUE(slurp(dir + "/near-held/shard-00000.lbs") == slurp(dir + "/clean-held/shard-00000.lbs"));
  // --dedup first takes the exact copy; across blocks and files the rest go too.
  std::ofstream(dir + "/second.txt") << long_document(70) + long_document(500);
  const PrepStats both = prep({dir + "/with.txt", dir + "/second.txt"}, dir + "/both", 3000, [](PrepOptions& o) {
    o.near_dedup = 0.8;
    o.dedup = true;
  });
  EXPECT_EQ(both.duplicates, 2);
  EXPECT_EQ(both.near_duplicates, 2);
  EXPECT_EQ(both.documents, 101);
}

TEST(NearDedup, ThresholdOutsideItsRangeIsRefused) {
  const std::string dir = testing::scratch_dir("prep_near_dedup_range");
  std::ofstream(dir + "/in.txt") << long_document(1);
  for (const double bad : {0.3, 0.499, 0.991, 1.0, -0.8, std::nan(""), HUGE_VAL, -HUGE_VAL}) {
    PrepOptions o;
    o.inputs = {dir + "/in.txt"};
    o.out_dir = dir + "/out";
    o.near_dedup = bad;
    const Status s = check_prep_options(o);
    EXPECT_FALSE(s.is_ok()) << bad;
    EXPECT_NE(s.to_string().find("--near-dedup"), std::string::npos) << s.to_string();
  }
  for (const double good : {0.5, 0.99, 0.0}) {  // 0: not asked for
    PrepOptions o;
    o.inputs = {dir + "/in.txt"};
    o.out_dir = dir + "/out";
    o.near_dedup = good;
    EXPECT_TRUE(check_prep_options(o).is_ok()) << good;
  }
}

}  // namespace
}  // namespace lansbert
