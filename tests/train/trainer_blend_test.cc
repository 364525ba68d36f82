// data.weights end to end: a blend of two sources trains, stops and resumes bit for bit, and
// its checkpoint's position counts the run's samples; a resume that would read a position as
// the other kind (a blend's as a plain run's, or over another number of sources) is refused,
// one with other weights is said; a source without samples and a file in two sources are
// refused by name (weights that do not fit data.train: config_loader_test.cc).
#include <gtest/gtest.h>

#include <cstdio>
#include <filesystem>
#include <nlohmann/json.hpp>

#include "lansbert/train/checkpoint.h"
#include "lansbert/train/trainer.h"
#include "tiny_shards_fixture.h"
#include "train_run_util.h"
#include "train_test_util.h"

namespace lansbert {
namespace {
namespace fs = std::filesystem;

using testing::scratch;
using testing::slurp;
using testing::train;

class TrainerBlendTest : public testing::TinyShardsTest {
 protected:
  // A second, smaller source (other documents, the same vocabulary) beside the fixture's.
  static void SetUpTestSuite() {
    TinyShardsTest::SetUpTestSuite();
    small_ = new std::string(scratch("small"));
    ASSERT_FALSE(testing::write_tiny_shards(*small_, 40, 32, 5, 8).empty());
  }
  static void TearDownTestSuite() {
    delete small_;
    small_ = nullptr;
    TinyShardsTest::TearDownTestSuite();
  }
  static TrainConfig blended(const std::string& ckpt, int64_t steps) {
    TrainConfig c = testing::tiny_config(*data_, ckpt, steps);
    c.data.train = {*data_ + "/shards/*.lbs", *small_ + "/shards/*.lbs"};
    c.data.weights = {0.5, 0.5};
    return c;
  }
  // run_training with its log captured.
  static Status train_logged(const TrainConfig& c, const std::string& resume, std::string* log, int64_t stop = -1) {
    auto comm = make_single_process_communicator();
    TrainOptions o;
    o.resume = resume;
    o.stop_at_step = stop;
    o.log = std::tmpfile();
    TrainResult r;
    const Status st = run_training(c, *comm, o, &r);
    std::rewind(o.log);
    log->clear();
    for (int ch; (ch = std::fgetc(o.log)) != EOF;) log->push_back(char(ch));
    std::fclose(o.log);
    return st;
  }
  inline static std::string* small_ = nullptr;
};

TEST_F(TrainerBlendTest, TrainsAndResumesBitIdentical) {
  const std::string a = scratch("blend-straight"), b = scratch("blend-resumed");
  TrainConfig ca = blended(a, 10), cb = blended(b, 10);
  TrainResult ra, rb1, rb2;
  ASSERT_TRUE(train(ca, &ra).is_ok());
  ASSERT_TRUE(train(cb, &rb1, "", 4).is_ok());
  ASSERT_TRUE(train(cb, &rb2, "latest").is_ok());
  EXPECT_EQ(rb2.step, 10);
  EXPECT_EQ(slurp(a + "/final/model.safetensors"), slurp(b + "/final/model.safetensors"));
  EXPECT_EQ(slurp(a + "/final/optimizer.state"), slurp(b + "/final/optimizer.state"));
  CheckpointMeta meta;
  ASSERT_TRUE(read_checkpoint_meta(a + "/final", &meta).is_ok());
  EXPECT_EQ(meta.data, (DataPosition{0, 10 * 32}));  // the small source (~100 samples) read over and over
  // Another blend of the same shards trains other weights.
  const std::string c = scratch("blend-other");
  TrainConfig cc = blended(c, 10);
  cc.data.weights = {0.9, 0.1};
  ASSERT_TRUE(train(cc, &ra).is_ok());
  EXPECT_NE(slurp(a + "/final/model.safetensors"), slurp(c + "/final/model.safetensors"));
}

TEST_F(TrainerBlendTest, ResumeAcrossKindsIsRefusedAndOtherWeightsAreSaid) {
  const std::string plain = scratch("plain"), blend = scratch("blend");
  TrainConfig cp = testing::tiny_config(*data_, plain, 6), cb = blended(blend, 6);
  TrainResult r;
  ASSERT_TRUE(train(cp, &r, "", 3).is_ok());
  ASSERT_TRUE(train(cb, &r, "", 3).is_ok());
  std::string log;
  // The plain run's checkpoint under a blend, and the blend's without one.
  TrainConfig blend_on_plain = blended(plain, 6);
  Status st = train_logged(blend_on_plain, "latest", &log);
  EXPECT_EQ(st.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(st.message().find("data.weights: the checkpoint's run read no blend (no data.weights), the config asks "
                              "for a blend of 2 sources"), std::string::npos) << st.message();
  TrainConfig plain_on_blend = testing::tiny_config(*data_, blend, 6);
  st = train_logged(plain_on_blend, "latest", &log);
  EXPECT_NE(st.message().find("read a blend of 2 sources, the config asks for no blend"), std::string::npos)
      << st.message();
  TrainConfig three = blended(blend, 6);
  const std::string copy = scratch("copy");
  fs::copy_file(*small_ + "/shards/shard-00000.lbs", copy + "/shard.lbs");
  three.data.train.push_back(copy + "/*.lbs");
  three.data.weights.push_back(1);
  st = train_logged(three, "latest", &log);
  EXPECT_NE(st.message().find("a blend of 3 sources"), std::string::npos) << st.message();
  // The same sources listed in another order (the weights would follow the places).
  TrainConfig swapped = blended(blend, 6);
  std::swap(swapped.data.train[0], swapped.data.train[1]);
  st = train_logged(swapped, "latest", &log);
  EXPECT_NE(st.message().find(": data.train[1] (\"" + *data_ + "/shards/*.lbs\") holds the samples the "
                              "checkpoint's run blended as data.train[0] (\"" + *data_ + "/shards/*.lbs\"): a blend "
                              "ties each weight"),
            std::string::npos)
      << st.message();
  // ... and moved as well: the samples tell.
  const std::string moved = scratch("moved");
  fs::copy(*data_ + "/shards", moved + "/big");
  fs::copy(*small_ + "/shards", moved + "/small");
  swapped.data.train = {moved + "/small/*.lbs", moved + "/big/*.lbs"};
  st = train_logged(swapped, "latest", &log);
  EXPECT_NE(st.message().find("data.train[1] (\"" + moved + "/big/*.lbs\") holds the samples the checkpoint's run "
                              "blended as data.train[0] (\"" + *data_ + "/shards/*.lbs\")"),
            std::string::npos)
      << st.message();
  // ... or one entry swapped in for another, the other replaced (not a permutation of them).
  const std::string third = scratch("third");
  fs::copy(*small_ + "/shards", third);
  fs::copy_file(*data_ + "/shards/shard-00000.lbs", third + "/shard-00001.lbs");  // other samples, where the digest reads
  swapped.data.train = {*small_ + "/shards/*.lbs", third + "/*.lbs"};
  st = train_logged(swapped, "latest", &log);
  EXPECT_NE(st.message().find("data.train[0] (\"" + *small_ + "/shards/*.lbs\") holds the samples the checkpoint's "
                              "run blended as data.train[1]"),
            std::string::npos)
      << st.message();
  // Moved in the same order: the same run (a note on the data only where it changed).
  swapped.data.train = {moved + "/big/*.lbs", moved + "/small/*.lbs"};
  st = train_logged(swapped, "latest", &log, 4);
  ASSERT_TRUE(st.is_ok()) << st.message();
  EXPECT_EQ(log.find("note:"), std::string::npos) << log;
  // The same shares written otherwise: no note.
  TrainConfig same = blended(blend, 6);
  same.data.weights = {1, 1};
  st = train_logged(same, "latest", &log, 5);
  ASSERT_TRUE(st.is_ok()) << st.message();
  EXPECT_EQ(log.find("note:"), std::string::npos) << log;
  // Other weights over the same sources: a note, and the run goes on.
  TrainConfig other = blended(blend, 6);
  other.data.weights = {3, 1};
  st = train_logged(other, "latest", &log);
  ASSERT_TRUE(st.is_ok()) << st.message();
  EXPECT_NE(log.find("note: data.weights [3.0,1.0] is not the checkpoint's [1.0,1.0]"), std::string::npos) << log;
}

// What is not a source moved to another entry: one of two identical sources replaced, and
// directories renamed so that each entry still holds its own samples under another glob.
TEST_F(TrainerBlendTest, ResumesWhereEachEntryStillHoldsItsSource) {
  const std::string ckpt = scratch("entries"), dirs = scratch("dirs");
  fs::copy(*data_ + "/shards", dirs + "/a");
  fs::copy(*data_ + "/shards", dirs + "/copy");
  TrainConfig c = blended(ckpt, 6);
  c.data.train = {dirs + "/a/*.lbs", dirs + "/copy/*.lbs"};
  TrainResult r;
  ASSERT_TRUE(train(c, &r, "", 2).is_ok());
  std::string log;
  c.data.train[1] = *small_ + "/shards/*.lbs";  // entry 1 replaced; entry 0 (equal to the old 1) kept
  Status st = train_logged(c, "latest", &log, 3);
  ASSERT_TRUE(st.is_ok()) << st.message();
  EXPECT_NE(log.find("note: data.train is not the data the checkpoint's run read"), std::string::npos) << log;
  // Renamed: a -> b, then the small source into a; listed as [b, a], each entry as before.
  fs::rename(dirs + "/a", dirs + "/b");
  fs::copy(*small_ + "/shards", dirs + "/a");
  c.data.train = {dirs + "/b/*.lbs", dirs + "/a/*.lbs"};
  st = train_logged(c, "latest", &log, 4);
  ASSERT_TRUE(st.is_ok()) << st.message();
  EXPECT_EQ(log.find("note:"), std::string::npos) << log;
  // Both sources rewritten in place, then listed the other way round: refused by the globs.
  {
    const std::string rewritten = scratch("rewritten");
    TrainConfig d = blended(rewritten, 6);
    fs::copy(*data_ + "/shards", dirs + "/p");
    fs::copy(*small_ + "/shards", dirs + "/q");
    d.data.train = {dirs + "/p/*.lbs", dirs + "/q/*.lbs"};
    ASSERT_TRUE(train(d, &r, "", 2).is_ok());
    fs::copy_file(*small_ + "/shards/shard-00000.lbs", dirs + "/p/shard-00001.lbs");
    fs::copy_file(*data_ + "/shards/shard-00000.lbs", dirs + "/q/shard-00001.lbs");
    d.data.train = {dirs + "/q/*.lbs", dirs + "/p/*.lbs"};
    st = train_logged(d, "latest", &log);
    EXPECT_NE(st.message().find("data.train[1] (\"" + dirs + "/p/*.lbs\") holds the glob the checkpoint's run "
                                "blended as data.train[0]"),
              std::string::npos)
        << st.message();
  }
  // Listed as [a, b] now, each entry holds the other's samples: refused by them.
  c.data.train = {dirs + "/a/*.lbs", dirs + "/b/*.lbs"};
  st = train_logged(c, "latest", &log);
  EXPECT_NE(st.message().find("data.train[1] (\"" + dirs + "/b/*.lbs\") holds the samples the checkpoint's run "
                              "blended as data.train[0] (\"" + dirs + "/b/*.lbs\")"),
            std::string::npos)
      << st.message();
}

TEST_F(TrainerBlendTest, RefusesWeightsThatDoNotFitTheSources) {
  const std::string dir = scratch("bad");
  TrainConfig c;
  TrainResult r;
  Status st;
  // A source whose files hold no sample.
  const std::string empty = scratch("empty-source");
  fs::create_directories(empty);
  {
    std::unique_ptr<ShardWriter> w;
    ShardInfo info;
    info.seq_len = 32;
    info.max_pred = 5;
    info.vocab_size = testing::kTinyVocab;
    info.cls_id = 2, info.sep_id = 3, info.mask_id = 4;
    Vocab vocab;
    ASSERT_TRUE(Vocab::load(*data_ + "/vocab.txt", &vocab).is_ok());
    info.vocab_hash = vocab.hash();
    ASSERT_TRUE(ShardWriter::create(empty + "/none.lbs", info, &w).is_ok());
    ASSERT_TRUE(w->finish().is_ok());
  }
  c = blended(dir, 2);
  c.data.train[1] = empty + "/*.lbs";
  st = train(c, &r);
  EXPECT_EQ(st.message(), "data.train[1]: the files of " + empty + "/*.lbs hold no samples, and data.weights[1] "
                          "asks for some") << st.message();
  // A file in both sources.
  c = blended(dir, 2);
  c.data.train[1] = *data_ + "/shards/shard-00000.lbs";
  st = train(c, &r);
  EXPECT_NE(st.message().find("data.train: " + *data_ + "/shards/shard-00000.lbs: in data.train[0] (" + *data_ +
                              "/shards/*.lbs) and in data.train[1]"), std::string::npos)
      << st.message();
}

}  // namespace
}  // namespace lansbert
