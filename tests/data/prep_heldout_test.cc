// prep's held-out set (--heldout-out, --heldout-fraction): whole documents, chosen by their
// text alone, never in a training instance (as sentence A or as a random sentence B), one
// pass and masked in the shards whatever the training side's dupe factor and masking; the
// same documents whatever the seed, block size or dynamic masking; errors leave both
// directories as they were. Each document's words map to one id of its own, so every token
// of an instance says which document it came from.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <set>

#include "lansbert/data/dataset.h"
#include "lansbert/data/prep.h"
#include "test_util.h"

namespace lansbert {
namespace {

namespace fs = std::filesystem;

constexpr int kDocs = 300;
constexpr int32_t kFirstId = 1000;  // document d's words are all "w<d>", id kFirstId + d

// "w17" -> 1017; the corpus has no other words.
Status doc_tokenize(std::string_view text, std::vector<int32_t>* ids) {
  Status s = Status::ok();
  testing::for_each_word(text, [&](std::string_view w) {
    if (w[0] != 'w') s = Status::corrupt("unexpected word");
    if (s.is_ok()) ids->push_back(kFirstId + std::stoi(std::string(w.substr(1))));
  });
  return s;
}

// Document d: 3 + d % 6 sentences (lines) of 4 + (d + s) % 9 words, as doc_tokenize reads it.
Document document(int d) {
  Document doc(3 + d % 6);
  for (size_t s = 0; s < doc.size(); ++s) doc[s].assign(4 + (d + s) % 9, kFirstId + d);
  return doc;
}

std::string make_corpus(const std::string& dir) {
  const std::string path = dir + "/corpus.txt";
  std::ofstream f(path);
  for (int d = 0; d < kDocs; ++d) {
    for (const auto& sentence : document(d)) {
      for (size_t k = 0; k < sentence.size(); ++k) f << (k ? " w" : "w") << d;
      f << "\n";
    }
    f << "\n";
  }
  return path;
}

std::set<int> expected_heldout(double fraction) {
  std::set<int> held;
  for (int d = 0; d < kDocs; ++d) {
    if (heldout_document(document(d), fraction)) held.insert(d);
  }
  return held;
}

PrepOptions options(const std::string& corpus, const std::string& dir, double fraction) {
  PrepOptions o;
  o.inputs = {corpus};
  o.out_dir = dir + "/train";
  o.heldout_dir = dir + "/heldout";
  o.heldout_fraction = fraction;
  o.block_bytes = 4000;  // many blocks
  o.shard_size = 200;
  o.instances.dupe_factor = 3;
  return o;
}

struct Side {
  std::set<int> docs;    // documents with a token in some instance
  int64_t records = 0, masked = 0;
  int64_t random_next = 0, random_from_own = 0;  // random B instances; of those, B from A's document
  ShardInfo info;
};

// Every token of every record, masked ones restored, by document.
Side read_side(const std::string& dir) {
  Side side;
  std::unique_ptr<ShardSet> set;
  const Status s = ShardSet::open({dir}, {}, &set);
  EXPECT_TRUE(s.is_ok()) << s.to_string();
  if (!s.is_ok()) return side;
  side.info = *set->info();
  Batch b;
  b.resize(1, set->seq_len(), set->max_pred());
  for (int64_t i = 0; i < set->count(); ++i) {
    EXPECT_TRUE(set->read(i, &b, 0).is_ok());
    std::vector<int32_t> ids = b.input_ids;
    for (int k = 0; k < b.max_pred; ++k) {
      if (b.masked_ids[k] == Batch::kIgnore) continue;
      ids[b.masked_positions[k]] = b.masked_ids[k];
      ++side.masked;
    }
    int a_doc = -1, b_doc = -1;
    for (int p = 0; p < b.seq_len; ++p) {
      if (!b.input_mask[p] || ids[p] == 101 || ids[p] == 102) continue;
      EXPECT_GE(ids[p], kFirstId);
      EXPECT_LT(ids[p], kFirstId + kDocs);
      side.docs.insert(ids[p] - kFirstId);
      (b.segment_ids[p] ? b_doc : a_doc) = ids[p] - kFirstId;
    }
    if (b.nsp_labels[0] == 1) {
      ++side.random_next;
      side.random_from_own += a_doc == b_doc;
    }
    ++side.records;
  }
  return side;
}

std::string slurp(const std::string& p) {
  std::ifstream f(p, std::ios::binary);
  return {std::istreambuf_iterator<char>(f), {}};
}

TEST(PrepHeldout, WholeDocumentsNeverInTraining) {
  const std::string dir = testing::scratch_dir("prep_heldout");
  const std::string corpus = make_corpus(dir);
  PrepStats st;
  const PrepOptions opts = options(corpus, dir, 0.2);
  const Status s = run_prep(opts, {}, testing::test_vocab(), doc_tokenize, &st);
  ASSERT_TRUE(s.is_ok()) << s.to_string();
  const std::set<int> held = expected_heldout(0.2);
  ASSERT_GT(held.size(), 30u);  // about 60 of 300
  ASSERT_LT(held.size(), 100u);
  EXPECT_EQ(st.documents, kDocs);
  EXPECT_EQ(st.heldout_documents, static_cast<int64_t>(held.size()));

  const Side train = read_side(opts.out_dir), heldout = read_side(opts.heldout_dir);
  EXPECT_EQ(heldout.docs, held);  // each held-out document, and its tokens alone
  for (const int d : train.docs) EXPECT_EQ(held.count(d), 0u) << "document " << d << " is in both";
  EXPECT_EQ(train.docs.size() + held.size(), size_t(kDocs));
  EXPECT_EQ(train.records, st.instances);
  EXPECT_EQ(heldout.records, st.heldout_instances);
  EXPECT_EQ(st.heldout_shards, (heldout.records + opts.shard_size - 1) / opts.shard_size);
  EXPECT_EQ(st.shards, (train.records + opts.shard_size - 1) / opts.shard_size);
  // One pass, masked, the run's other settings.
  EXPECT_EQ(heldout.info.dupe_factor, 1);
  EXPECT_FALSE(heldout.info.dynamic_masking);
  EXPECT_EQ(train.info.dupe_factor, 3);
  EXPECT_GE(heldout.masked, heldout.records);
  EXPECT_EQ(heldout.info.seq_len, 128);
  EXPECT_EQ(heldout.info.seed, 12345u);
  // About three training instances per held-out one (the dupe factor), give or take the
  // documents' lengths.
  EXPECT_GT(train.records, 2 * heldout.records);
}

// A random sentence B comes from another document than A on either side, even where a block
// holds out one document or none (the held-out documents are pooled across blocks).
TEST(PrepHeldout, RandomNextIsAnotherDocumentEvenInSmallBlocks) {
  const std::string dir = testing::scratch_dir("prep_heldout_pool");
  const std::string corpus = make_corpus(dir);
  for (const size_t block : {size_t(300), size_t(4000)}) {  // one document a block, or about twenty
    PrepOptions o = options(corpus, dir + "/" + std::to_string(block), 0.1);
    o.block_bytes = block;
    PrepStats st;
    ASSERT_TRUE(run_prep(o, {}, testing::test_vocab(), doc_tokenize, &st).is_ok());
    const Side heldout = read_side(o.heldout_dir), train = read_side(o.out_dir);
    EXPECT_GT(heldout.random_next, 10) << block;
    EXPECT_EQ(heldout.random_from_own, 0) << block;
    // The training side draws B from its block, as BERT's reference draws from the whole
    // corpus: with a document a block there is no other (prep's --block-mb is megabytes).
    EXPECT_GT(train.random_next, 100) << block;
    if (block > 300) {
      EXPECT_EQ(train.random_from_own, 0) << block;
    }
  }
  // The held-out shards do not depend on the block size.
  EXPECT_EQ(slurp(dir + "/300/heldout/shard-00000.lbs"), slurp(dir + "/4000/heldout/shard-00000.lbs"));
}

// The held-out documents depend on the text and the fraction only; a smaller fraction holds
// out a subset; the held-out instances do not depend on the training side's dupe factor or
// masking.
TEST(PrepHeldout, SameDocumentsWhateverTheSeedBlockAndMasking) {
  const std::string dir = testing::scratch_dir("prep_heldout_same");
  const std::string corpus = make_corpus(dir);
  PrepStats st;
  PrepOptions a = options(corpus, dir + "/a", 0.2);
  ASSERT_TRUE(run_prep(a, {}, testing::test_vocab(), doc_tokenize, &st).is_ok());
  PrepOptions b = options(corpus, dir + "/b", 0.2);
  b.instances.dupe_factor = 1;
  b.instances.dynamic_masking = true;
  ASSERT_TRUE(run_prep(b, {}, testing::test_vocab(), doc_tokenize, &st).is_ok());
  EXPECT_EQ(slurp(a.heldout_dir + "/shard-00000.lbs"), slurp(b.heldout_dir + "/shard-00000.lbs"));
  EXPECT_TRUE(read_side(b.out_dir).info.dynamic_masking);
  EXPECT_EQ(read_side(b.out_dir).masked, 0);
  EXPECT_GT(read_side(b.heldout_dir).masked, 0);

  PrepOptions c = options(corpus, dir + "/c", 0.2);
  c.instances.seed = 99;
  c.block_bytes = 1 << 20;  // one block
  c.threads = 3;
  ASSERT_TRUE(run_prep(c, {}, testing::test_vocab(), doc_tokenize, &st).is_ok());
  EXPECT_EQ(read_side(c.heldout_dir).docs, expected_heldout(0.2));

  PrepOptions d = options(corpus, dir + "/d", 0.05);
  ASSERT_TRUE(run_prep(d, {}, testing::test_vocab(), doc_tokenize, &st).is_ok());
  const std::set<int> small = read_side(d.heldout_dir).docs;
  EXPECT_EQ(small, expected_heldout(0.05));
  EXPECT_FALSE(small.empty());
  EXPECT_LT(small.size(), expected_heldout(0.2).size());
  EXPECT_TRUE(std::includes(expected_heldout(0.2).begin(), expected_heldout(0.2).end(), small.begin(), small.end()));
}

// Bad held-out options are refused before anything is written; a run that holds out
// nothing, or everything, fails and leaves both directories as they were.
TEST(PrepHeldout, ErrorsLeaveBothDirectories) {
  const std::string dir = testing::scratch_dir("prep_heldout_errors");
  const std::string corpus = make_corpus(dir);
  PrepStats st;
  const PrepOptions good = options(corpus, dir, 0.2);
  ASSERT_TRUE(run_prep(good, {}, testing::test_vocab(), doc_tokenize, &st).is_ok());
  const std::string train0 = slurp(good.out_dir + "/shard-00000.lbs");
  const std::string held0 = slurp(good.heldout_dir + "/shard-00000.lbs");
  const auto unchanged = [&] {
    EXPECT_EQ(slurp(good.out_dir + "/shard-00000.lbs"), train0);
    EXPECT_EQ(slurp(good.heldout_dir + "/shard-00000.lbs"), held0);
  };
  struct Case {
    std::string what;
    double fraction;
    std::string heldout_dir;
  };
  std::vector<Case> cases = {
      {"--heldout-fraction 0", 0.0, good.heldout_dir},
      {"--heldout-fraction 1", 1.0, good.heldout_dir},
      {"--heldout-fraction -0.5", -0.5, good.heldout_dir},
      {"--heldout-fraction nan", std::nan(""), good.heldout_dir},
      {"--heldout-out " + good.out_dir + ": is the --out directory", 0.2, good.out_dir},
      {"--heldout-out " + good.out_dir + "/: is the --out directory", 0.2, good.out_dir + "/"},
      {"--heldout-out " + dir + "/train/../train: is the --out", 0.2, dir + "/train/../train"},
      {"--heldout-out " + corpus + ": exists and is not a directory", 0.2, corpus},
      {"--heldout-out " + dir + "/./new-out/: is the --out directory", 0.2, dir + "/./new-out/"},
      {"held out none of the 300 documents", 1e-9, good.heldout_dir},
      {"no training instances: --heldout-fraction 0.999999", 0.999999, good.heldout_dir},
  };
  // A fraction just above the smallest document's hash holds out exactly one: refused too.
  double smallest = 1;
  for (int d = 0; d < kDocs; ++d) smallest = std::min(smallest, double(document_hash(document(d)) >> 11) * 0x1p-53);
  const double one = std::nextafter(smallest, 1.0);
  ASSERT_EQ(expected_heldout(one).size(), 1u);
  cases.push_back({fmt::format("--heldout-fraction {} held out 1 of the 300 documents; a held-out set needs 2", one),
                   one, good.heldout_dir});
  for (const Case& c : cases) {
    PrepOptions o = good;
    o.heldout_fraction = c.fraction;
    o.heldout_dir = c.heldout_dir;
    if (c.heldout_dir.find("new-out") != std::string::npos) o.out_dir = dir + "/new-out";  // neither exists
    const Status s = run_prep(o, {}, testing::test_vocab(), doc_tokenize, &st);
    EXPECT_EQ(s.code(), StatusCode::kInvalidArgument) << c.what << ": " << s.to_string();
    EXPECT_NE(s.message().find(c.what), std::string::npos) << s.to_string();
    unchanged();
    for (const auto& e : fs::directory_iterator(good.heldout_dir)) {
      EXPECT_NE(e.path().filename().string().rfind(".prep-staging", 0), 0u) << e.path();
    }
  }
  // A held-out directory inside --out is fine (data.train's out/*.lbs does not reach into it),
  // and one that did not exist is removed again by a failed run.
  PrepOptions inside = good;
  inside.heldout_dir = good.out_dir + "/heldout";
  ASSERT_TRUE(run_prep(inside, {}, testing::test_vocab(), doc_tokenize, &st).is_ok());
  EXPECT_TRUE(fs::exists(inside.heldout_dir + "/shard-00000.lbs"));
  // A run that fails (it holds out nothing) leaves no directory it made behind.
  const auto fails_leaving_nothing = [&](const std::string& out_dir, const std::string& heldout_dir,
                                         const std::string& made) {
    PrepOptions o = good;
    o.out_dir = out_dir;
    o.heldout_dir = heldout_dir;
    o.heldout_fraction = 1e-9;
    EXPECT_FALSE(run_prep(o, {}, testing::test_vocab(), doc_tokenize, &st).is_ok()) << heldout_dir;
    EXPECT_FALSE(fs::exists(made)) << made;
  };
  fails_leaving_nothing(good.out_dir, dir + "/new-heldout", dir + "/new-heldout");
  fails_leaving_nothing(dir + "/m/o", dir + "/m", dir + "/m");  // --out inside a new held-out directory
  fails_leaving_nothing(dir + "/p/q/train", dir + "/p/held", dir + "/p");  // siblings in new parents
  // The same through a symbolic link to the held-out directory's parent.
  fs::create_directories(dir + "/real");
  fs::create_directory_symlink(dir + "/real", dir + "/link");
  fails_leaving_nothing(dir + "/link/new/train", dir + "/real/new", dir + "/real/new");
  PrepOptions nested = good;
  nested.heldout_dir = dir + "/m";
  nested.out_dir = dir + "/m/o";
  nested.heldout_fraction = 0.2;
  ASSERT_TRUE(run_prep(nested, {}, testing::test_vocab(), doc_tokenize, &st).is_ok());
  EXPECT_TRUE(fs::exists(dir + "/m/o/shard-00000.lbs") && fs::exists(dir + "/m/shard-00000.lbs"));
  // An input with no document blames the input, not the held-out fraction.
  std::ofstream(dir + "/blank.txt") << "\n \n";
  PrepOptions blank = good;
  blank.inputs = {dir + "/blank.txt"};
  const Status s = run_prep(blank, {}, testing::test_vocab(), doc_tokenize, &st);
  EXPECT_NE(s.message().find("the input produced no instances"), std::string::npos) << s.to_string();
  unchanged();
}

// Errors and signals during the run leave both directories as they were, and the message
// names both.
TEST(PrepHeldout, MidRunErrorsAndSignalsLeaveBothDirectories) {
  const std::string dir = testing::scratch_dir("prep_heldout_midrun");
  const std::string corpus = make_corpus(dir);
  PrepStats st;
  const PrepOptions good = options(corpus, dir, 0.5);  // more than one pool of held-out documents
  ASSERT_TRUE(run_prep(good, {}, testing::test_vocab(), doc_tokenize, &st).is_ok());
  const std::string train0 = slurp(good.out_dir + "/shard-00000.lbs");
  const std::string held0 = slurp(good.heldout_dir + "/shard-00000.lbs");
  std::ofstream(dir + "/late.txt") << "w1 w2\n\nw3 oops\n";  // a tokenizer error in the last block
  PrepOptions bad = good;
  bad.inputs = {corpus, dir + "/late.txt"};
  Status s = run_prep(bad, {}, testing::test_vocab(), doc_tokenize, &st);
  EXPECT_EQ(s.code(), StatusCode::kCorrupt) << s.to_string();
  EXPECT_GT(st.heldout_instances, 0);  // it had written held-out shards
  EXPECT_EQ(slurp(good.out_dir + "/shard-00000.lbs"), train0);
  EXPECT_EQ(slurp(good.heldout_dir + "/shard-00000.lbs"), held0);
  PrepOptions stopped = good;
  int polls = 0;
  stopped.stop = [&polls] { return ++polls > 20 ? 15 : 0; };  // SIGTERM, partway
  s = run_prep(stopped, {}, testing::test_vocab(), doc_tokenize, &st);
  EXPECT_EQ(s.code(), StatusCode::kInterrupted) << s.to_string();
  EXPECT_NE(s.message().find(good.out_dir + " and " + good.heldout_dir + " are as they were before the run"),
            std::string::npos)
      << s.to_string();
  EXPECT_EQ(slurp(good.out_dir + "/shard-00000.lbs"), train0);
  EXPECT_EQ(slurp(good.heldout_dir + "/shard-00000.lbs"), held0);
  for (const auto& d : {good.out_dir, good.heldout_dir}) {
    for (const auto& e : fs::directory_iterator(d)) {
      EXPECT_NE(e.path().filename().string().rfind(".prep-staging", 0), 0u) << e.path();
    }
  }
}

// The hash reads sentence boundaries and every id: documents that differ anywhere differ.
TEST(PrepHeldout, DocumentHashSeesEveryTokenAndBoundary) {
  const Document a = {{5, 6, 7}, {8}};
  EXPECT_EQ(document_hash(a), document_hash(Document{{5, 6, 7}, {8}}));
  EXPECT_NE(document_hash(a), document_hash(Document{{5, 6}, {7, 8}}));
  EXPECT_NE(document_hash(a), document_hash(Document{{5, 6, 7}, {9}}));
  EXPECT_NE(document_hash(a), document_hash(Document{{6, 5, 7}, {8}}));
  EXPECT_NE(document_hash(a), document_hash(Document{{5, 6, 7, 8}}));
  // Read as a fraction the hashes are spread evenly: about 10% of 10,000 documents below 0.1.
  int below = 0;
  for (int d = 0; d < 10000; ++d) below += heldout_document(Document{{d, d + 1}}, 0.1);
  EXPECT_GT(below, 900);
  EXPECT_LT(below, 1100);
}

}  // namespace
}  // namespace lansbert
