// NVIDIA's HDF5 schema: a file written here with the HDF5 C API (gzip-chunked datasets, the
// dtypes NVIDIA writes; tests/data/nvidia_hdf5_file.h) reads back exactly, alone and next to our shards in one ShardSet.
#include "lansbert/data/hdf5_shard.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <hdf5.h>

#include "lansbert/data/dataset.h"
#include "nvidia_hdf5_file.h"
#include "test_util.h"

namespace lansbert {
namespace {

using testing::kN;
using testing::kP;
using testing::kS;
using testing::make_data;
using testing::NvidiaData;
using testing::write_nvidia_file;

TEST(Hdf5Shard, ReadsNvidiaSchemaExactly) {
  const NvidiaData d = make_data();
  const std::string dir = testing::scratch_dir("hdf5");
  write_nvidia_file(dir + "/wiki_training_0.hdf5", d);
  write_nvidia_file(dir + "/wiki_test_0.hdf5", d);
  std::unique_ptr<ShardSet> set;
  ShardSetOptions opts;
  opts.training_only = true;
  ASSERT_TRUE(ShardSet::open({dir + "/*.hdf5"}, opts, &set).is_ok());
  ASSERT_EQ(set->num_shards(), 1u);
  ASSERT_EQ(set->count(), kN);
  ASSERT_EQ(set->seq_len(), kS);
  ASSERT_EQ(set->max_pred(), kP);
  Batch b;
  b.resize(2, kS, kP);
  for (int n = 0; n < kN; ++n) {
    ASSERT_TRUE(set->read(n, &b, 1).is_ok());
    for (int i = 0; i < kS; ++i) {
      ASSERT_EQ(b.input_ids[kS + i], d.ids[n * kS + i]);
      ASSERT_EQ(b.input_mask[kS + i], d.mask[n * kS + i]);
      ASSERT_EQ(b.segment_ids[kS + i], d.seg[n * kS + i]);
    }
    for (int k = 0; k < kP; ++k) {
      const bool used = d.pos[n * kP + k] != 0;
      ASSERT_EQ(b.masked_positions[kP + k], d.pos[n * kP + k]);
      ASSERT_EQ(b.masked_ids[kP + k], used ? d.mids[n * kP + k] : Batch::kIgnore);
    }
    ASSERT_EQ(b.nsp_labels[1], d.nsp[n]);
  }
}

// input_mask is 1 or 0: the attention reads other values as packed sequence numbers.
TEST(Hdf5Shard, MaskOtherThanZeroOrOneIsNamed) {
  NvidiaData d = make_data();
  d.mask[3 * kS + 4] = 2;
  const std::string path = write_nvidia_file(testing::scratch_dir("hdf5_mask") + "/wiki_training_0.hdf5", d);
  std::unique_ptr<Hdf5ShardReader> r;
  ASSERT_TRUE(Hdf5ShardReader::open(path, &r).is_ok());
  Batch b;
  b.resize(1, kS, kP);
  EXPECT_TRUE(r->read(2, &b, 0).is_ok());
  const Status s = r->read(3, &b, 0);
  ASSERT_EQ(s.code(), StatusCode::kCorrupt);
  EXPECT_NE(s.message().find(path + ": sample 3: input_mask[4] = 2 is neither 0 nor 1"), std::string::npos)
      << s.message();
}

// segment_ids above the model's token types (BERT's 2, or a Hugging Face model's
// type_vocab_size) are a corrupt sample, named as the other fields are, not a fatal error in
// the model's embedding lookup.
TEST(Hdf5Shard, SegmentIdsBeyondTheModelsTokenTypesAreNamed) {
  NvidiaData d = make_data();
  d.seg[5 * kS + 2] = 5;
  const std::string dir = testing::scratch_dir("hdf5_seg");
  write_nvidia_file(dir + "/wiki_training_0.hdf5", d);
  std::unique_ptr<ShardSet> set;
  ASSERT_TRUE(ShardSet::open({dir}, ShardSetOptions{}, &set).is_ok());
  Batch b;
  b.resize(1, kS, kP);
  EXPECT_TRUE(set->read(4, &b, 0).is_ok());
  Status s = set->read(5, &b, 0);
  ASSERT_EQ(s.code(), StatusCode::kCorrupt);
  EXPECT_NE(s.message().find("wiki_training_0.hdf5: sample 5: segment_ids[2] = 5 is outside [0, 2) (the model's "
                             "token types)"),
            std::string::npos)
      << s.message();
  ShardSetOptions one_type;  // a model of one token type: sentence B's ids are beyond it
  one_type.segment_limit = 1;
  ASSERT_TRUE(ShardSet::open({dir}, one_type, &set).is_ok());
  s = set->read(4, &b, 0);
  int first_b = 0;  // sentence B's first position
  while (d.seg[4 * kS + first_b] == 0) ++first_b;
  EXPECT_NE(s.message().find("sample 4: segment_ids[" + std::to_string(first_b) + "] = 1 is outside [0, 1)"),
            std::string::npos)
      << s.message();
}

// A file without masked-LM slots ([N, 0] positions) gives the MLM loss nothing: refused at open.
TEST(Hdf5Shard, NoMaskedSlotsIsAnUnusableShape) {
  const std::string path = write_nvidia_file(testing::scratch_dir("hdf5_p0") + "/wiki_training_0.hdf5", make_data(), 0);
  std::unique_ptr<Hdf5ShardReader> r;
  const Status s = Hdf5ShardReader::open(path, &r);
  ASSERT_EQ(s.code(), StatusCode::kCorrupt);
  EXPECT_NE(s.message().find(path + ": unusable shape: seq len 128, max pred 0"), std::string::npos) << s.message();
}

TEST(Hdf5Shard, MissingDatasetIsNamed) {
  const std::string path = testing::scratch_dir("hdf5_bad") + "/bad.hdf5";
  const hid_t f = H5Fcreate(path.c_str(), H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT);
  H5Fclose(f);
  std::unique_ptr<Hdf5ShardReader> r;
  const Status s = Hdf5ShardReader::open(path, &r);
  ASSERT_EQ(s.code(), StatusCode::kCorrupt);
  EXPECT_NE(s.message().find(path), std::string::npos);
  EXPECT_NE(s.message().find("no dataset 'input_ids'"), std::string::npos) << s.message();
}

// A format other than kAny takes only files of that kind, naming the first other one; NVIDIA's
// training-file rule skips files without 'training' in their name, and leaving none is named
// as the rule's doing. Without the rule NVIDIA's test files open (the held-out set).
TEST(ShardSet, FormatAndTrainingRuleAsAsked) {
  const std::string dir = testing::scratch_dir("hdf5_format");
  write_nvidia_file(dir + "/wiki_training_0.hdf5", make_data());
  write_nvidia_file(dir + "/wiki_test_0.hdf5", make_data());
  std::filesystem::create_directories(dir + "/lbs");
  ShardInfo info;  // a shard of no records: only its kind matters here
  info.vocab_size = 30522;
  std::unique_ptr<ShardWriter> w;
  ASSERT_TRUE(ShardWriter::create(dir + "/lbs/a_training.lbs", info, &w).is_ok());
  ASSERT_TRUE(w->finish().is_ok());
  std::unique_ptr<ShardSet> set;
  ShardSetOptions lbs, hdf5, training;
  lbs.format = ShardFormat::kLbs;
  hdf5.format = training.format = ShardFormat::kHdf5;
  training.training_only = true;
  Status s = ShardSet::open({dir + "/*.hdf5"}, lbs, &set);
  ASSERT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find(dir + "/wiki_test_0.hdf5: an HDF5 file, where format lbs asks for lansbert shards"),
            std::string::npos) << s.message();
  s = ShardSet::open({dir + "/lbs"}, training, &set);
  ASSERT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find(dir + "/lbs/a_training.lbs: not an HDF5 file"), std::string::npos) << s.message();
  s = ShardSet::open({dir + "/wiki_test_0.hdf5", dir + "/*test*"}, training, &set);  // one file, named twice
  ASSERT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("1 file matches " + dir + "/wiki_test_0.hdf5 " + dir + "/*test*, none with 'training' in "
                             "its name"),
            std::string::npos) << s.message();
  ASSERT_TRUE(ShardSet::open({dir}, training, &set).is_ok());
  EXPECT_EQ(set->num_shards(), 1u);
  ASSERT_TRUE(ShardSet::open({dir + "/wiki_test_0.hdf5"}, hdf5, &set).is_ok());
  EXPECT_EQ(set->count(), kN);
  ASSERT_TRUE(ShardSet::open({dir + "/lbs"}, lbs, &set).is_ok());
}

TEST(ShardSet, NoFilesIsAClearError) {
  std::unique_ptr<ShardSet> set;
  const Status s = ShardSet::open({"/nonexistent/*.lbs"}, {}, &set);
  EXPECT_EQ(s.code(), StatusCode::kNotFound);
  EXPECT_NE(s.message().find("/nonexistent/*.lbs"), std::string::npos);
}

}  // namespace
}  // namespace lansbert
