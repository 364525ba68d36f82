// Our shard format: round trip in both id widths, version-1 files, and a clear error naming
// the file and the offset for each
// kind of damage (flipped byte, truncation, wrong magic, wrong version, other vocab, values
// out of range under a valid checksum).
#include "lansbert/data/shard.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>

#include "lansbert/core/crc32c.h"
#include "lansbert/data/dataset.h"
#include "test_util.h"

namespace lansbert {
namespace {

std::vector<Instance> sample_instances(bool dynamic = false) {
  InstanceOptions opts;
  opts.dynamic_masking = dynamic;
  std::vector<Instance> out;
  create_instances(testing::synthetic_documents(40, 20, 20), 0, 0, opts, testing::test_vocab(), 1, &out);
  return out;
}

// vocab_size 30522 stores 2-byte ids; above 65,536 the writer switches to 4.
std::string write_shard(const std::string& path, const std::vector<Instance>& insts,
                        bool dynamic = false, int32_t vocab_size = 30522) {
  ShardInfo info;
  info.vocab_size = vocab_size;
  info.vocab_hash = 0x1234;
  info.dynamic_masking = dynamic;
  std::unique_ptr<ShardWriter> w;
  EXPECT_TRUE(ShardWriter::create(path, info, &w).is_ok());
  for (const auto& inst : insts) EXPECT_TRUE(w->add(inst).is_ok());
  EXPECT_TRUE(w->finish().is_ok());
  EXPECT_FALSE(std::filesystem::exists(path + ".tmp"));
  return path;
}

std::string slurp(const std::string& p) {
  std::ifstream f(p, std::ios::binary);
  return {std::istreambuf_iterator<char>(f), {}};
}
void spit(const std::string& p, const std::string& s) {
  std::ofstream f(p, std::ios::binary | std::ios::trunc);
  f << s;
}

// Reads back every field of every record: the batch rows the loader gets.
void expect_round_trip(const std::string& path, const std::vector<Instance>& insts) {
  std::unique_ptr<LbShardReader> r;
  ASSERT_TRUE(LbShardReader::open(path, &r).is_ok());
  EXPECT_EQ(r->info().vocab_hash, 0x1234u);
  ASSERT_EQ(r->count(), int64_t(insts.size()));
  EXPECT_EQ(r->seq_len(), 128);
  EXPECT_EQ(r->max_pred(), 20);
  EXPECT_FALSE(r->dynamic_masking());
  EXPECT_TRUE(r->verify_all().is_ok());
  Batch b;
  b.resize(1, 128, 20);
  for (size_t i = 0; i < insts.size(); ++i) {
    ASSERT_TRUE(r->read(int64_t(i), &b, 0).is_ok());
    const Instance& in = insts[i];
    for (int s = 0; s < 128; ++s) {
      const bool real = s < int(in.tokens.size());
      ASSERT_EQ(b.input_ids[s], real ? in.tokens[s] : 0);
      ASSERT_EQ(b.input_mask[s], real ? 1 : 0);
      ASSERT_EQ(b.segment_ids[s], real && s > in.a_end ? 1 : 0);
    }
    for (int k = 0; k < 20; ++k) {
      const bool used = k < int(in.masked_positions.size());
      ASSERT_EQ(b.masked_positions[k], used ? in.masked_positions[k] : 0);
      ASSERT_EQ(b.masked_ids[k], used ? in.masked_ids[k] : Batch::kIgnore);
    }
    ASSERT_EQ(b.nsp_labels[0], in.is_random_next ? 1 : 0);
  }
}

// Both id widths (2 bytes for BERT's vocab, 4 above 65,536 entries) read back what was
// written, and the 2-byte records are the smaller ones: 348 bytes instead of 644 at 128/20.
TEST(Shard, RoundTrip) {
  const auto insts = sample_instances();
  const std::string dir = testing::scratch_dir("shard_rt");
  const std::string narrow = write_shard(dir + "/a.lbs", insts), wide = write_shard(dir + "/b.lbs", insts, false, 100000);
  expect_round_trip(narrow, insts);
  expect_round_trip(wide, insts);
  EXPECT_EQ(shard_record_size(128, 20, 2), 348);
  EXPECT_EQ(shard_record_size(128, 20, 4), 644);
  EXPECT_EQ(std::filesystem::file_size(narrow), 256 + insts.size() * 348);
  EXPECT_EQ(std::filesystem::file_size(wide), 256 + insts.size() * 644);
}

// Version 1 files (every id in 4 bytes whatever the vocab) are still read. Such a file with
// BERT's 30,522-token vocab is a version-2 file written with 4-byte ids, its vocab size set to
// 30,522 and its version to 1: the version, not the vocab, sets the width, and version 1
// ignores offset 88 (here made 2, which would be wrong for these records).
TEST(Shard, Version1FilesStillRead) {
  const auto insts = sample_instances();  // every id below 30,522
  const std::string path = write_shard(testing::scratch_dir("shard_v1") + "/v1.lbs", insts, false, 100000);
  std::string bytes = slurp(path);
  auto put32 = [&](size_t at, uint32_t v) { std::memcpy(bytes.data() + at, &v, 4); };
  auto reopen = [&] {
    put32(252, crc32c(bytes.data(), 252));
    spit(path, bytes);
    std::unique_ptr<LbShardReader> r;
    return LbShardReader::open(path, &r);
  };
  put32(8, 1);
  put32(40, 30522);
  put32(88, 2);
  ASSERT_TRUE(reopen().is_ok());
  expect_round_trip(path, insts);
  // Version-2 headers whose width is neither 2 nor 4, or 2 for a vocab above 65,536, are
  // corrupt, by offset.
  put32(8, 2);
  put32(88, 3);
  Status s = reopen();
  ASSERT_EQ(s.code(), StatusCode::kCorrupt);
  EXPECT_NE(s.message().find(path + ": header id width 3 at byte offset 88 is neither 2 nor 4"), std::string::npos)
      << s.message();
  put32(88, 2);
  put32(40, 65537);
  s = reopen();
  ASSERT_EQ(s.code(), StatusCode::kCorrupt);
  EXPECT_NE(s.message().find(path + ": header id width 2 at byte offset 88 cannot hold the vocab size 65537"),
            std::string::npos) << s.message();
  // A vocab size past int32 is named as stored (it once printed as a negative number).
  put32(88, 4);
  put32(40, 0xFFFFFFFBu);
  s = reopen();
  ASSERT_EQ(s.code(), StatusCode::kCorrupt);
  EXPECT_NE(s.message().find(path + ": header vocab size 4294967291 at byte offset 40 is outside [1, 2^31)"),
            std::string::npos) << s.message();
}

// A file shorter than the header is "truncated" only when what it holds starts like a shard;
// a short text file among the shards is named as not a shard.
TEST(Shard, ShortFilesAreTruncatedShardsOrNotShards) {
  const std::string dir = testing::scratch_dir("shard_short");
  const std::string whole = slurp(write_shard(dir + "/whole.lbs", sample_instances()));
  auto open = [&](const std::string& name, const std::string& bytes) {
    spit(dir + "/" + name, bytes);
    std::unique_ptr<LbShardReader> r;
    return LbShardReader::open(dir + "/" + name, &r);
  };
  Status s = open("text.lbs", "hello, world\n");
  ASSERT_EQ(s.code(), StatusCode::kCorrupt);
  EXPECT_NE(s.message().find(dir + "/text.lbs: wrong magic at byte offset 0: expected \"LBSHARD\\0\", found 68 65 6c 6c "
                             "6f 2c 20 77 (13 bytes in all): not a lansbert shard"),
            std::string::npos) << s.message();
  for (size_t keep : {size_t(0), size_t(5), size_t(100)}) {
    s = open("cut.lbs", whole.substr(0, keep));
    ASSERT_EQ(s.code(), StatusCode::kCorrupt) << keep;
    EXPECT_NE(s.message().find(dir + "/cut.lbs: truncated: file is " + std::to_string(keep) +
                               " bytes, the header alone needs 256"),
              std::string::npos) << s.message();
  }
}

// Flag bits and reserved bytes this version does not define are refused by offset, even
// under a recomputed checksum: they are a later writer's fields this build would misread.
TEST(Shard, UnknownFlagsAndReservedBytesAreCorrupt) {
  const std::string path = write_shard(testing::scratch_dir("shard_reserved") + "/r.lbs", sample_instances());
  const std::string original = slurp(path);
  auto reopen = [&](std::string bytes) {
    const uint32_t crc = crc32c(bytes.data(), 252);
    std::memcpy(bytes.data() + 252, &crc, 4);
    spit(path, bytes);
    std::unique_ptr<LbShardReader> r;
    return LbShardReader::open(path, &r);
  };
  ASSERT_TRUE(reopen(original).is_ok());
  std::string bytes = original;
  const uint32_t flags = 2 | 8;  // dynamic masking and a bit no version defines
  std::memcpy(bytes.data() + 44, &flags, 4);
  Status s = reopen(bytes);
  ASSERT_EQ(s.code(), StatusCode::kCorrupt);
  EXPECT_NE(s.message().find(path + ": header flags 0xa at byte offset 44 set bits this build does not know (0x8)"),
            std::string::npos) << s.message();
  for (size_t at : {size_t(92), size_t(251)}) {
    bytes = original;
    bytes[at] = 1;
    s = reopen(bytes);
    ASSERT_EQ(s.code(), StatusCode::kCorrupt) << at;
    EXPECT_NE(s.message().find(path + ": header byte offset " + std::to_string(at) +
                               " is 0x01; bytes 92..251 are reserved and zero in versions 1 to 2"),
              std::string::npos) << s.message();
  }
}

// The width's boundary: a vocab of exactly 65,536 entries still takes 2-byte ids, whose top
// half (32,768 and up) reads back unsigned; one more entry takes 4. An id that 2 bytes cannot
// hold is refused by the writer, by record, and leaves the records before it intact.
TEST(Shard, TwoByteIdsUpToAVocabOf65536) {
  EXPECT_EQ(shard_id_bytes(65536), 2);
  EXPECT_EQ(shard_id_bytes(65537), 4);
  std::vector<Instance> insts = sample_instances();
  ASSERT_GE(insts.size(), 3u);
  ASSERT_FALSE(insts[1].masked_ids.empty());
  insts[0].tokens[2] = 65535;
  insts[1].tokens[1] = 32768;
  insts[1].masked_ids[0] = 65535;
  const std::string dir = testing::scratch_dir("shard_65536");
  const std::string path = write_shard(dir + "/a.lbs", insts, false, 65536);
  EXPECT_EQ(std::filesystem::file_size(path), 256 + insts.size() * 348);
  expect_round_trip(path, insts);
  ShardInfo info;
  info.vocab_size = 30522;
  std::unique_ptr<ShardWriter> w;
  ASSERT_TRUE(ShardWriter::create(dir + "/b.lbs", info, &w).is_ok());
  ASSERT_TRUE(w->add(insts[0]).is_ok());
  Instance too_big = insts[2];
  too_big.tokens[4] = 70000;
  const Status s = w->add(too_big);
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("record 1: token id 70000 does not fit the shard's 2-byte ids"), std::string::npos)
      << s.message();
  ASSERT_TRUE(w->finish().is_ok());
  std::unique_ptr<LbShardReader> r;
  ASSERT_TRUE(LbShardReader::open(dir + "/b.lbs", &r).is_ok());
  EXPECT_EQ(r->count(), 1);
  ShardInfo empty;
  empty.vocab_size = 0;
  EXPECT_EQ(ShardWriter::create(dir + "/c.lbs", empty, &w).code(), StatusCode::kInvalidArgument);
  ShardInfo no_slots = info;
  no_slots.max_pred = 0;  // the reader would refuse the file: the writer refuses to start it
  const Status s0 = ShardWriter::create(dir + "/d.lbs", no_slots, &w);
  EXPECT_EQ(s0.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(s0.message().find("bad shard shape seq_len=128 max_pred=0"), std::string::npos) << s0.message();
  EXPECT_FALSE(std::filesystem::exists(dir + "/d.lbs.tmp"));
}

// One file named several ways is read once: a directory with a trailing slash beside a glob of
// it, a "./" spelling and a symlink (a duplicate in data.train would double its samples).
TEST(ShardSet, OneFileNamedTwiceIsReadOnce) {
  const std::string dir = testing::scratch_dir("shard_set_dedup");
  const auto insts = sample_instances();
  write_shard(dir + "/d.lbs", insts);
  std::filesystem::create_directories(dir + "/links");
  std::filesystem::create_symlink(dir + "/d.lbs", dir + "/links/alias.lbs");
  std::unique_ptr<ShardSet> set;
  ASSERT_TRUE(ShardSet::open({dir + "/", dir + "/*.lbs", dir + "/./d.lbs", dir + "/links/*.lbs"}, {}, &set).is_ok());
  EXPECT_EQ(set->num_shards(), 1u);
  EXPECT_EQ(set->count(), int64_t(insts.size()));
}

// A blend's sources lie one after another in the global index, source 1's first even where its
// paths sort after source 2's; a file in two sources (however spelled) is refused, naming both.
TEST(ShardSet, SourcesInTheirOrderAndNoFileInTwo) {
  const std::string dir = testing::scratch_dir("shard_set_sources");
  std::filesystem::create_directories(dir + "/z");
  std::filesystem::create_directories(dir + "/a");
  const auto insts = sample_instances();
  write_shard(dir + "/z/a.lbs", insts);
  write_shard(dir + "/z/b.lbs", {insts[0], insts[1]});
  write_shard(dir + "/a/c.lbs", {insts[2]});
  std::unique_ptr<ShardSet> set;
  ASSERT_TRUE(ShardSet::open_sources({{dir + "/z/*.lbs"}, {dir + "/a"}}, {}, &set).is_ok());
  ASSERT_EQ(set->source_sizes(), (std::vector<int64_t>{int64_t(insts.size()) + 2, 1}));
  EXPECT_EQ(set->where(0), dir + "/z/a.lbs: sample 0");
  EXPECT_EQ(set->where(int64_t(insts.size()) + 2), dir + "/a/c.lbs: sample 0");
  ASSERT_TRUE(ShardSet::open({dir + "/z/*.lbs", dir + "/a"}, {}, &set).is_ok());
  EXPECT_EQ(set->source_sizes(), (std::vector<int64_t>{int64_t(insts.size()) + 3}));
  EXPECT_EQ(set->where(0), dir + "/a/c.lbs: sample 0");
  const Status st = ShardSet::open_sources({{dir + "/z/*.lbs"}, {dir + "/a/c.lbs"}, {dir + "/z/./b.lbs"}}, {}, &set);
  EXPECT_EQ(st.code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(st.message(), dir + "/z/./b.lbs: in source[0] (" + dir + "/z/*.lbs) and in source[2] (" + dir +
                              "/z/./b.lbs): a blend's sources must not share files");
  EXPECT_EQ(ShardSet::open_sources({{dir + "/a"}, {dir + "/none*"}}, {}, &set).code(), StatusCode::kNotFound);
}

class ShardDamage : public ::testing::Test {
 protected:
  void SetUp() override {
    // One directory per test, so that `ctest -j` runs them side by side safely.
    const std::string name = ::testing::UnitTest::GetInstance()->current_test_info()->name();
    path_ = write_shard(testing::scratch_dir("shard_damage_" + name) + "/d.lbs", sample_instances());
    bytes_ = slurp(path_);
  }
  Status open_damaged() {
    spit(path_, bytes_);
    std::unique_ptr<LbShardReader> r;
    return LbShardReader::open(path_, &r);
  }
  std::string path_, bytes_;
};

TEST_F(ShardDamage, FlippedByteInRecord) {
  const size_t record = shard_record_size(128, 20, 2);
  const size_t off = 256 + 3 * record + 17;
  bytes_[off] ^= 0x10;
  spit(path_, bytes_);
  std::unique_ptr<LbShardReader> r;
  ASSERT_TRUE(LbShardReader::open(path_, &r).is_ok());  // header is fine
  Batch b;
  b.resize(1, 128, 20);
  EXPECT_TRUE(r->read(2, &b, 0).is_ok());
  const Status s = r->read(3, &b, 0);
  ASSERT_EQ(s.code(), StatusCode::kCorrupt);
  EXPECT_NE(s.message().find(path_), std::string::npos) << s.message();
  EXPECT_NE(s.message().find("record 3"), std::string::npos) << s.message();
  EXPECT_NE(s.message().find(std::to_string(256 + 3 * record)), std::string::npos) << s.message();
  EXPECT_NE(s.message().find("checksum mismatch"), std::string::npos) << s.message();
  EXPECT_EQ(r->verify_all().code(), StatusCode::kCorrupt);
}

TEST_F(ShardDamage, FlippedByteInHeader) {
  bytes_[60] ^= 0x01;  // inside the seed
  const Status s = open_damaged();
  ASSERT_EQ(s.code(), StatusCode::kCorrupt);
  EXPECT_NE(s.message().find(path_), std::string::npos);
  EXPECT_NE(s.message().find("header checksum mismatch"), std::string::npos) << s.message();
}

TEST_F(ShardDamage, Truncated) {
  const size_t record = shard_record_size(128, 20, 2);
  bytes_.resize(bytes_.size() - record / 2);
  const Status s = open_damaged();
  ASSERT_EQ(s.code(), StatusCode::kCorrupt);
  EXPECT_NE(s.message().find(path_), std::string::npos);
  EXPECT_NE(s.message().find("truncated"), std::string::npos) << s.message();
  EXPECT_NE(s.message().find("is incomplete"), std::string::npos) << s.message();
  bytes_.resize(100);
  const Status s2 = open_damaged();
  EXPECT_NE(s2.message().find("file is 100 bytes"), std::string::npos) << s2.message();
}

// A shard truncated after it was opened (rewritten in place by `cp`, cut by hand): reading a
// record whose page is past the new end is an I/O error naming the file and record, not a
// SIGBUS that ends the process; records still there read as before, and a fault after the
// first is caught as well.
TEST(Shard, ShrunkUnderAnOpenReaderIsAnIoErrorNotASignal) {
  const std::string path = write_shard(testing::scratch_dir("shard_shrunk") + "/s.lbs", sample_instances());
  std::unique_ptr<LbShardReader> r;
  ASSERT_TRUE(LbShardReader::open(path, &r).is_ok());
  const int64_t rs = shard_record_size(128, 20, 2), far = r->count() - 1;
  ASSERT_GT(256 + far * rs, 3 * 4096) << "the last record must lie pages past the cut";
  Batch b;
  b.resize(1, 128, 20);
  ASSERT_TRUE(r->read(far, &b, 0).is_ok());
  ASSERT_EQ(::truncate(path.c_str(), 256 + 2 * rs), 0);
  for (int attempt = 0; attempt < 2; ++attempt) {
    const Status st = r->read(far, &b, 0);
    EXPECT_EQ(st.code(), StatusCode::kIoError) << st.to_string();
    EXPECT_NE(st.message().find(path + ": record " + std::to_string(far) + " at byte offset " +
                                std::to_string(256 + far * rs) + ": the file is now " + std::to_string(256 + 2 * rs) + " bytes, shorter than the " +
                                std::to_string(256 + r->count() * rs) + " it had when opened"),
              std::string::npos)
        << st.message();
  }
  EXPECT_TRUE(r->read(1, &b, 0).is_ok());
}

// The guard takes only faults of its own copies: any other SIGBUS (here one sent, after a read
// installed the guard) still ends the process as it would have.
TEST(ShardDeathTest, OtherBusErrorsStillEndTheProcess) {
  ::testing::FLAGS_gtest_death_test_style = "threadsafe";
  const std::string path = write_shard(testing::scratch_dir("shard_sigbus") + "/s.lbs", sample_instances());
  EXPECT_EXIT(
      {
        std::unique_ptr<LbShardReader> r;
        if (!LbShardReader::open(path, &r).is_ok()) std::exit(3);
        Batch b;
        b.resize(1, 128, 20);
        if (!r->read(0, &b, 0).is_ok()) std::exit(4);
        raise(SIGBUS);
        std::exit(0);
      },
      ::testing::KilledBySignal(SIGBUS), "");
}

// Header values under a valid checksum (a writer's bug, or a crafted file) are named as stored,
// unsigned: a seq_len of 2^32 - 1 is not -1, and a record count beyond any file does not wrap.
TEST_F(ShardDamage, StoredShapeAndCountAreNamedAsStored) {
  auto put = [&](size_t at, auto v) {
    std::memcpy(bytes_.data() + at, &v, sizeof v);
    const uint32_t crc = crc32c(bytes_.data(), 252);
    std::memcpy(bytes_.data() + 252, &crc, 4);
  };
  const std::string good = bytes_;
  put(16, uint32_t(0xffffffff));
  Status s = open_damaged();
  ASSERT_EQ(s.code(), StatusCode::kCorrupt);
  EXPECT_NE(s.message().find(path_ + ": header seq_len 4294967295 / max_pred 20 at byte offsets 16 / 20"),
            std::string::npos)
      << s.message();
  bytes_ = good;
  put(20, uint32_t(129));
  s = open_damaged();
  EXPECT_NE(s.message().find("header seq_len 128 / max_pred 129"), std::string::npos) << s.message();
  bytes_ = good;
  put(20, uint32_t(0));  // no masked slot: nothing for the masked-LM loss
  s = open_damaged();
  EXPECT_NE(s.message().find("header seq_len 128 / max_pred 0"), std::string::npos) << s.message();
  bytes_ = good;
  put(24, uint64_t(1) << 63);
  s = open_damaged();
  ASSERT_EQ(s.code(), StatusCode::kCorrupt);
  const size_t record = shard_record_size(128, 20, 2), records = (good.size() - 256) / record;
  EXPECT_NE(s.message().find(path_ + ": truncated: header says 9223372036854775808 records of " +
                             std::to_string(record) + " bytes, file has " + std::to_string(good.size()) +
                             " bytes; record " + std::to_string(records) + " at byte offset " +
                             std::to_string(good.size()) + " is incomplete"),
            std::string::npos)
      << s.message();
  bytes_ = good;
  put(24, uint64_t(records - 2));
  s = open_damaged();
  EXPECT_NE(s.message().find("trailing bytes: header says " + std::to_string(records - 2) + " records of " +
                             std::to_string(record) + " bytes (" + std::to_string(256 + (records - 2) * record) +
                             " bytes in all), file has " + std::to_string(good.size()) + " bytes; record " +
                             std::to_string(records - 2) + " at byte offset " +
                             std::to_string(256 + (records - 2) * record) + " is extra"),
            std::string::npos)
      << s.message();
}

TEST_F(ShardDamage, WrongMagic) {
  bytes_.replace(0, 8, "\x89HDF\r\n\x1a\n", 8);
  const Status s = open_damaged();
  ASSERT_EQ(s.code(), StatusCode::kCorrupt);
  EXPECT_NE(s.message().find(path_), std::string::npos);
  EXPECT_NE(s.message().find("wrong magic at byte offset 0"), std::string::npos) << s.message();
  EXPECT_NE(s.message().find("89 48 44 46"), std::string::npos) << s.message();
}

TEST_F(ShardDamage, WrongVersion) {
  bytes_[8] = 9;
  const Status s = open_damaged();
  ASSERT_EQ(s.code(), StatusCode::kCorrupt);
  EXPECT_NE(s.message().find(path_), std::string::npos);
  EXPECT_NE(s.message().find("unsupported shard version 9 at byte offset 8"), std::string::npos)
      << s.message();
}

TEST_F(ShardDamage, VocabMismatch) {
  ShardSetOptions o;
  o.vocab_hash = 0xabcd;
  std::unique_ptr<ShardSet> set;
  const Status s = ShardSet::open({path_}, o, &set);
  ASSERT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find(path_), std::string::npos);
  EXPECT_NE(s.message().find("vocabulary mismatch"), std::string::npos) << s.message();
  EXPECT_NE(s.message().find("0x0000000000001234"), std::string::npos) << s.message();
  EXPECT_NE(s.message().find("0x000000000000abcd"), std::string::npos) << s.message();
}

// A set's check names where the expected hash came from (data.vocab, a checkpoint's vocab).
TEST(Shard, SetNamesTheVocabItChecksAgainst) {
  const std::string path = write_shard(testing::scratch_dir("shard_set_vocab") + "/v.lbs", sample_instances());
  ShardSetOptions o;
  o.vocab_hash = 0xabcd;
  o.vocab_source = "data.vocab /v/vocab.txt";
  std::unique_ptr<ShardSet> set;
  Status s = ShardSet::open({path}, o, &set);
  ASSERT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find(path + ": vocabulary mismatch: the shard was made with a vocab of hash "
                                    "0x0000000000001234 ("),
            std::string::npos) << s.message();
  EXPECT_NE(s.message().find("data.vocab /v/vocab.txt has hash 0x000000000000abcd"), std::string::npos) << s.message();
  o.vocab_source.clear();
  s = ShardSet::open({path}, o, &set);
  EXPECT_NE(s.message().find("this run's vocab has hash 0x000000000000abcd"), std::string::npos) << s.message();
  o.vocab_hash = 0x1234;
  EXPECT_TRUE(ShardSet::open({path}, o, &set).is_ok());
}

TEST(Shard, MissingFile) {
  std::unique_ptr<LbShardReader> r;
  const Status s = LbShardReader::open("/nonexistent/x.lbs", &r);
  EXPECT_EQ(s.code(), StatusCode::kNotFound);
  EXPECT_NE(s.message().find("/nonexistent/x.lbs"), std::string::npos);
}

// Fields whose checksum is valid but whose values are not (a writer's bug, or a crafted
// file): ShardSet::read reports each as corrupt, naming the file, the sample and the field,
// instead of handing the model an id outside its embedding table.
TEST(ShardFields, OutOfRangeValuesAreCorruptNamingTheField) {
  // 2-byte ids (vocab 30522) hold no negative id, 4-byte ones (vocab 100000) do.
  for (const auto& [vocab, bad_masked] : {std::pair{30522, 40000}, std::pair{100000, -7}}) {
    SCOPED_TRACE(vocab);
    std::vector<Instance> insts = sample_instances();
    ASSERT_GE(insts.size(), 5u);
    ASSERT_FALSE(insts[2].masked_ids.empty());
    insts[1].tokens[3] = vocab;          // the header's vocab size: one past the last id
    insts[2].masked_ids[0] = bad_masked;
    insts[3].masked_positions[0] = 300;  // seq_len is 128
    const std::string path =
        write_shard(testing::scratch_dir("shard_fields_" + std::to_string(vocab)) + "/f.lbs", insts, false, vocab);
    std::unique_ptr<ShardSet> set;
    ASSERT_TRUE(ShardSet::open({path}, ShardSetOptions{}, &set).is_ok());
    Batch b;
    b.resize(1, 128, 20);
    EXPECT_TRUE(set->read(0, &b, 0).is_ok());
    EXPECT_TRUE(set->read(4, &b, 0).is_ok());
    const std::string v = std::to_string(vocab);
    const std::vector<std::pair<int, std::string>> want = {
        {1, "sample 1: input_ids[3] = " + v + " is outside [0, " + v + ") (the vocabulary)"},
        {2, "sample 2: masked_lm_ids[0] = " + std::to_string(bad_masked) + " is outside [0, " + v + ")"},
        {3, "sample 3: masked_lm_positions[0] = 300 is outside [0, 128)"}};
    for (const auto& [index, text] : want) {
      const Status s = set->read(index, &b, 0);
      ASSERT_EQ(s.code(), StatusCode::kCorrupt) << index;
      EXPECT_NE(s.message().find(path + ": " + text), std::string::npos) << s.message();
    }
  }
}

// The model's vocab_size bounds ids too (HDF5 files record no vocab size of their own).
TEST(ShardFields, TokenLimitIsTheModelsVocab) {
  const std::vector<Instance> insts = sample_instances();
  const std::string path = write_shard(testing::scratch_dir("shard_limit") + "/l.lbs", insts);
  int32_t top = 0;
  for (int32_t t : insts[0].tokens) top = std::max(top, t);
  for (int32_t t : insts[0].masked_ids) top = std::max(top, t);
  Batch b;
  b.resize(1, 128, 20);
  for (int32_t limit : {top, top + 1}) {
    ShardSetOptions o;
    o.token_limit = limit;
    std::unique_ptr<ShardSet> set;
    ASSERT_TRUE(ShardSet::open({path}, o, &set).is_ok());
    EXPECT_EQ(set->read(0, &b, 0).is_ok(), limit > top) << limit;
  }
}

// Header ids the loader uses (dynamic masking writes [MASK]) must lie in the vocab.
TEST(ShardFields, SpecialIdsOutsideTheVocabAreCorrupt) {
  ShardInfo info;
  info.vocab_size = 103;
  info.mask_id = 103;  // BERT's [MASK] id, one past this vocab's last
  const std::string path = testing::scratch_dir("shard_special") + "/s.lbs";
  std::unique_ptr<ShardWriter> w;
  ASSERT_TRUE(ShardWriter::create(path, info, &w).is_ok());
  ASSERT_TRUE(w->finish().is_ok());
  std::unique_ptr<LbShardReader> r;
  const Status s = LbShardReader::open(path, &r);
  ASSERT_EQ(s.code(), StatusCode::kCorrupt);
  EXPECT_NE(s.message().find(path + ": header [MASK] id 103 at byte offset 84 is outside the vocab [0, 103)"),
            std::string::npos) << s.message();
}

}  // namespace
}  // namespace lansbert
