// run_prep end to end with a stand-in tokenizer (word -> id by hash): the same seed gives
// byte-identical shards for 1 and 4 threads and any shard size split; the shards read back
// with the recorded parameters and the token count prep reports; sentence splitting follows the documented rule.
#include "lansbert/data/prep.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/file.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <csignal>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iterator>
#include <limits>

#include "lansbert/data/dataset.h"
#include "lansbert/data/text_reader.h"
#include "test_util.h"

namespace lansbert {
namespace {

namespace fs = std::filesystem;

Status fake_tokenize(std::string_view text, std::vector<int32_t>* ids) { return testing::hash_tokenize(text, ids); }

std::string make_corpus(const std::string& dir) {
  const std::string path = dir + "/corpus.txt";
  std::ofstream f(path);
  for (int d = 0; d < 300; ++d) {
    f << "Document " << d << " heading\n";
    for (int p = 0; p < 4 + d % 7; ++p) {
      for (int s = 0; s < 3; ++s) f << "Sentence " << s << " of paragraph " << p << " talks about item " << (d * 13 + p * 7 + s) % 97 << ". ";
      f << "\n";
    }
    f << "\n";
  }
  return path;
}

std::string slurp(const std::string& p) {
  std::ifstream f(p, std::ios::binary);
  return {std::istreambuf_iterator<char>(f), {}};
}

std::vector<std::string> prep(const std::string& corpus, const std::string& out, int threads,
                              int64_t shard_size, PrepStats* stats) {
  PrepOptions opts;
  opts.inputs = {corpus};
  opts.out_dir = out;
  opts.threads = threads;
  opts.shard_size = shard_size;
  opts.block_bytes = 20000;  // many blocks
  opts.instances.dupe_factor = 2;
  ShardInfo base;
  base.vocab_size = 30522;
  base.vocab_hash = 77;
  const Status s = run_prep(opts, base, testing::test_vocab(), fake_tokenize, stats);
  EXPECT_TRUE(s.is_ok()) << s.to_string();
  std::vector<std::string> files;
  for (const auto& e : fs::directory_iterator(out)) files.push_back(e.path().string());
  std::sort(files.begin(), files.end());
  return files;
}

TEST(Prep, DeterministicForAnyThreadCount) {
  const std::string dir = testing::scratch_dir("prep");
  const std::string corpus = make_corpus(dir);
  PrepStats s1, s4;
  const auto one = prep(corpus, dir + "/t1", 1, 500, &s1);
  const auto four = prep(corpus, dir + "/t4", 4, 500, &s4);
  ASSERT_GT(s1.instances, 1000);
  EXPECT_EQ(s1.documents, 300);
  ASSERT_EQ(one.size(), four.size());
  ASSERT_GT(one.size(), 2u);
  for (size_t i = 0; i < one.size(); ++i) {
    EXPECT_EQ(fs::path(one[i]).filename(), fs::path(four[i]).filename());
    EXPECT_TRUE(slurp(one[i]) == slurp(four[i])) << one[i];
  }
  // Rerunning into the same directory with bigger shards replaces the old files.
  PrepStats s2;
  const auto again = prep(corpus, dir + "/t1", 2, 1 << 20, &s2);
  EXPECT_EQ(again.size(), 1u);
  std::unique_ptr<ShardSet> set;
  ShardSetOptions so;
  so.vocab_hash = 77;
  ASSERT_TRUE(ShardSet::open({dir + "/t1"}, so, &set).is_ok());
  EXPECT_EQ(set->count(), s1.instances);
  const ShardInfo& info = *set->info();
  EXPECT_EQ(info.dupe_factor, 2);
  EXPECT_EQ(info.seed, 12345u);
  EXPECT_FLOAT_EQ(info.masked_lm_prob, 0.15f);
  auto* lb = dynamic_cast<LbShardReader*>(&set->shard(0));
  ASSERT_NE(lb, nullptr);
  EXPECT_TRUE(lb->verify_all().is_ok());
  // instance_tokens (prep's "the sequences are N% tokens") is what the records hold.
  Batch b;
  b.resize(1, set->seq_len(), set->max_pred());
  int64_t tokens = 0;
  for (int64_t i = 0; i < set->count(); ++i) {
    ASSERT_TRUE(set->read(i, &b, 0).is_ok());
    for (const auto m : b.input_mask) tokens += m;
  }
  EXPECT_EQ(tokens, s2.instance_tokens);
  EXPECT_EQ(s1.instance_tokens, s2.instance_tokens);
  EXPECT_LT(s2.instance_tokens, s2.instances * 128);
}

TEST(Prep, EmptyInputIsAnError) {
  const std::string dir = testing::scratch_dir("prep_empty");
  std::ofstream(dir + "/empty.txt") << "\n\n";
  PrepOptions opts;
  opts.inputs = {dir + "/empty.txt"};
  opts.out_dir = dir + "/out";
  PrepStats st;
  EXPECT_EQ(run_prep(opts, {}, testing::test_vocab(), fake_tokenize, &st).code(), StatusCode::kInvalidArgument);
  opts.inputs = {dir + "/missing.txt"};
  const Status s = run_prep(opts, {}, testing::test_vocab(), fake_tokenize, &st);
  EXPECT_EQ(s.code(), StatusCode::kNotFound);
  EXPECT_NE(s.message().find("missing.txt"), std::string::npos);
}

// Each bad option is refused before anything is written, with the option named; an
// existing output directory keeps its shards.
TEST(Prep, BadOptionsAreRefusedUpFrontNamingTheOption) {
  const std::string dir = testing::scratch_dir("prep_bad_options");
  const std::string corpus = make_corpus(dir);
  PrepStats st;
  prep(corpus, dir + "/out", 1, 1 << 20, &st);
  const std::string shard = dir + "/out/shard-00000.lbs";
  const std::string before = slurp(shard);
  ASSERT_FALSE(before.empty());
  const float nan = std::numeric_limits<float>::quiet_NaN();
  struct Case {
    const char* option;
    std::function<void(PrepOptions*)> set;
  };
  const std::vector<Case> cases = {
      {"--seq-len", [](PrepOptions* o) { o->instances.max_seq_len = 7; }},
      {"--seq-len", [](PrepOptions* o) { o->instances.max_seq_len = 65536; }},
      {"--max-pred", [](PrepOptions* o) { o->instances.max_pred = 0; }},
      {"--max-pred", [](PrepOptions* o) { o->instances.max_pred = 129; }},
      {"--dupe-factor", [](PrepOptions* o) { o->instances.dupe_factor = 0; }},
      {"--dupe-factor", [](PrepOptions* o) { o->instances.dupe_factor = kMaxDupeFactor + 1; }},
      {"--masked-lm-prob", [&](PrepOptions* o) { o->instances.masked_lm_prob = nan; }},
      {"--masked-lm-prob", [](PrepOptions* o) { o->instances.masked_lm_prob = 0; }},
      {"--masked-lm-prob", [](PrepOptions* o) { o->instances.masked_lm_prob = 1; }},
      {"--short-seq-prob", [&](PrepOptions* o) { o->instances.short_seq_prob = nan; }},
      {"--short-seq-prob", [](PrepOptions* o) { o->instances.short_seq_prob = -0.5f; }},
      {"--shard-size", [](PrepOptions* o) { o->shard_size = 0; }},
      {"--block-mb", [](PrepOptions* o) { o->block_bytes = 0; }},
      {"--block-mb", [](PrepOptions* o) { o->block_bytes = kMaxPrepBlockBytes + 1; }},
      {"--threads", [](PrepOptions* o) { o->threads = -1; }},
      {"--threads", [](PrepOptions* o) { o->threads = 100000; }},  // crashed libgomp
      {"--input", [](PrepOptions* o) { o->inputs.clear(); }},
      {"--out", [&](PrepOptions* o) { o->out_dir = corpus; }},  // a file
  };
  for (const Case& c : cases) {
    PrepOptions opts;
    opts.inputs = {corpus};
    opts.out_dir = dir + "/out";
    c.set(&opts);
    const Status s = run_prep(opts, {}, testing::test_vocab(), fake_tokenize, &st);
    EXPECT_EQ(s.code(), StatusCode::kInvalidArgument) << c.option << ": " << s.to_string();
    EXPECT_NE(s.message().find(c.option), std::string::npos) << c.option << ": " << s.to_string();
    EXPECT_EQ(slurp(shard), before) << c.option;
  }
  // The defaults pass.
  PrepOptions ok;
  ok.inputs = {corpus};
  ok.out_dir = dir + "/out";
  EXPECT_TRUE(check_prep_options(ok).is_ok());
}

// Inputs are checked before the output is touched: missing, a directory, or all empty.
TEST(Prep, BadInputsAreRefusedUpFront) {
  const std::string dir = testing::scratch_dir("prep_bad_inputs");
  const std::string corpus = make_corpus(dir);
  std::ofstream(dir + "/empty.txt").close();
  fs::create_directories(dir + "/adir");
  PrepOptions opts;
  opts.out_dir = dir + "/never";
  PrepStats st;
  opts.inputs = {corpus, dir + "/missing.txt"};
  Status s = run_prep(opts, {}, testing::test_vocab(), fake_tokenize, &st);
  EXPECT_EQ(s.code(), StatusCode::kNotFound);
  EXPECT_NE(s.message().find("missing.txt"), std::string::npos) << s.to_string();
  opts.inputs = {corpus, dir + "/adir"};
  s = run_prep(opts, {}, testing::test_vocab(), fake_tokenize, &st);
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("adir: is a directory"), std::string::npos) << s.to_string();
  opts.inputs = {dir + "/empty.txt"};
  s = run_prep(opts, {}, testing::test_vocab(), fake_tokenize, &st);
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("empty.txt"), std::string::npos) << s.to_string();
  EXPECT_FALSE(fs::exists(dir + "/never"));
}

// Names in `dir`, hidden ones included, sorted.
std::vector<std::string> listing(const std::string& dir) {
  std::vector<std::string> names;
  for (const auto& e : fs::directory_iterator(dir)) names.push_back(e.path().filename().string());
  std::sort(names.begin(), names.end());
  return names;
}

// A run that fails after it has written shards (a tokenizer error in a late block, or no
// instances) leaves the earlier run's shards as they were and no staging behind.
TEST(Prep, FailedRunLeavesEarlierShards) {
  const std::string dir = testing::scratch_dir("prep_failed_run");
  const std::string corpus = make_corpus(dir);
  PrepStats st;
  const auto files = prep(corpus, dir + "/out", 1, 500, &st);
  ASSERT_GT(files.size(), 2u);
  std::vector<std::string> before;
  for (const auto& f : files) before.push_back(slurp(f));
  const auto names = listing(dir + "/out");

  std::ofstream(dir + "/poison.txt") << "Fine text here.\n\nThis line has POISON in it.\n";
  const TokenizeFn poisoned = [](std::string_view text, std::vector<int32_t>* ids) {
    if (text.find("POISON") != std::string_view::npos) return Status::corrupt("poisoned sentence");
    return fake_tokenize(text, ids);
  };
  PrepOptions opts;
  opts.inputs = {corpus, dir + "/poison.txt"};  // the error comes after many shards
  opts.out_dir = dir + "/out";
  opts.shard_size = 100;
  opts.block_bytes = 20000;
  Status s = run_prep(opts, {}, testing::test_vocab(), poisoned, &st);
  EXPECT_EQ(s.code(), StatusCode::kCorrupt) << s.to_string();
  EXPECT_NE(s.message().find("poison.txt:3"), std::string::npos) << s.to_string();
  EXPECT_GT(st.shards, int64_t(files.size()));  // it had written more shards than there were
  EXPECT_EQ(listing(dir + "/out"), names);
  for (size_t i = 0; i < files.size(); ++i) EXPECT_TRUE(slurp(files[i]) == before[i]) << files[i];

  std::ofstream(dir + "/blank.txt") << "\n\n  \n";  // not empty, but no sentence
  opts.inputs = {dir + "/blank.txt"};
  s = run_prep(opts, {}, testing::test_vocab(), fake_tokenize, &st);
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument) << s.to_string();
  EXPECT_EQ(listing(dir + "/out"), names);
  for (size_t i = 0; i < files.size(); ++i) EXPECT_TRUE(slurp(files[i]) == before[i]) << files[i];

  // A failed run into a new directory does not leave it behind.
  opts.out_dir = dir + "/new";
  EXPECT_FALSE(run_prep(opts, {}, testing::test_vocab(), fake_tokenize, &st).is_ok());
  EXPECT_FALSE(fs::exists(dir + "/new"));
  // Nor the parents it made for it; a parent that was there stays, and so does a file that
  // appeared in a made one meanwhile (here: before the run, in a parent it then found).
  opts.out_dir = dir + "/made/deeper/out/";
  EXPECT_FALSE(run_prep(opts, {}, testing::test_vocab(), fake_tokenize, &st).is_ok());
  EXPECT_FALSE(fs::exists(dir + "/made"));
  EXPECT_TRUE(fs::exists(dir + "/out"));
  fs::create_directories(dir + "/kept");
  std::ofstream(dir + "/kept/note.txt") << "mine";
  opts.out_dir = dir + "/kept/a/b";
  EXPECT_FALSE(run_prep(opts, {}, testing::test_vocab(), fake_tokenize, &st).is_ok());
  EXPECT_FALSE(fs::exists(dir + "/kept/a"));
  EXPECT_TRUE(fs::exists(dir + "/kept/note.txt"));
}

// A stop request (lansbert prep: SIGINT/SIGTERM/SIGUSR1) ends the run at the next check, whatever
// stage it is in: the status names the signal, and the directory keeps the earlier shards.
TEST(Prep, StopRequestEndsTheRunAndKeepsEarlierShards) {
  const std::string dir = testing::scratch_dir("prep_stop");
  const std::string corpus = make_corpus(dir);
  PrepStats st;
  // A whole run counts its polls; then runs that stop at the first, a middle and the last
  // poll must each leave its shards as they are.
  PrepOptions opts;
  opts.inputs = {corpus};
  opts.out_dir = dir + "/out";
  opts.shard_size = 100;
  opts.block_bytes = 20000;
  std::atomic<int> polls = 0;  // polled from the reading thread and the making one
  opts.stop = [&polls] { return ++polls, 0; };
  ASSERT_TRUE(run_prep(opts, {}, testing::test_vocab(), fake_tokenize, &st).is_ok());
  ASSERT_GT(polls, 10);
  const int total = polls;
  const auto names = listing(dir + "/out");
  ASSERT_GT(names.size(), 2u);
  std::vector<std::string> before;
  for (const auto& f : names) before.push_back(slurp(dir + "/out/" + f));
  for (const int at : {1, total / 2, total}) {
    std::atomic<int> n = 0;
    opts.stop = [&n, at] { return ++n >= at ? SIGTERM : 0; };
    const Status s = run_prep(opts, {}, testing::test_vocab(), fake_tokenize, &st);
    EXPECT_EQ(s.code(), StatusCode::kInterrupted) << "poll " << at << ": " << s.to_string();
    EXPECT_NE(s.message().find("stopped by SIGTERM"), std::string::npos) << s.to_string();
    EXPECT_EQ(s.exit_code(), 130);
    EXPECT_EQ(listing(dir + "/out"), names) << "poll " << at;  // no staging directory left
    for (size_t i = 0; i < names.size(); ++i) EXPECT_TRUE(slurp(dir + "/out/" + names[i]) == before[i]) << names[i];
  }
}

// An interrupted run's staging directory is removed by the next run; a run refuses a
// directory another run is writing to (holds the lock), without touching it.
TEST(Prep, StaleStagingIsRemovedAndLiveRunsExclude) {
  const std::string dir = testing::scratch_dir("prep_staging");
  const std::string corpus = make_corpus(dir);
  PrepStats st;
  const auto files = prep(corpus, dir + "/out", 1, 1 << 20, &st);
  fs::create_directories(dir + "/out/.prep-staging-crashed");
  std::ofstream(dir + "/out/.prep-staging-crashed/shard-00000.lbs.tmp") << "partial";
  prep(corpus, dir + "/out", 1, 1 << 20, &st);
  EXPECT_EQ(listing(dir + "/out"), std::vector<std::string>{"shard-00000.lbs"});

  const int fd = ::open((dir + "/out").c_str(), O_RDONLY | O_DIRECTORY);
  ASSERT_GE(fd, 0);
  ASSERT_EQ(::flock(fd, LOCK_EX), 0);
  const std::string before = slurp(files[0]);
  PrepOptions opts;
  opts.inputs = {corpus};
  opts.out_dir = dir + "/out";
  const Status s = run_prep(opts, {}, testing::test_vocab(), fake_tokenize, &st);
  ::close(fd);
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);  // exit 2, as train's lock
  EXPECT_NE(s.message().find("another lansbert prep or convert is writing"), std::string::npos) << s.to_string();
  EXPECT_EQ(listing(dir + "/out"), std::vector<std::string>{"shard-00000.lbs"});
  EXPECT_TRUE(slurp(files[0]) == before);
}

TEST(Text, SplitSentences) {
  std::vector<std::string> out;
  split_sentences("  The cat sat. It purred! \"Why?\" Nobody knew... e.g. this stays. 3 more.", &out);
  ASSERT_EQ(out.size(), 5u);
  EXPECT_EQ(out[0], "The cat sat.");
  EXPECT_EQ(out[1], "It purred!");
  EXPECT_EQ(out[2], "\"Why?\"");
  EXPECT_EQ(out[3], "Nobody knew... e.g. this stays.");
  EXPECT_EQ(out[4], "3 more.");
}

}  // namespace
}  // namespace lansbert
