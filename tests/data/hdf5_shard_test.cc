// NVIDIA's HDF5 schema: a file written here with the HDF5 C API (gzip-chunked datasets, the
// dtypes of DATA.md) reads back exactly, alone and next to our shards in one ShardSet.
#include "lansbert/data/hdf5_shard.h"

#include <gtest/gtest.h>
#include <hdf5.h>

#include "lansbert/data/dataset.h"
#include "test_util.h"

namespace lansbert {
namespace {

constexpr int kN = 37, kS = 128, kP = 20;

struct NvidiaData {
  std::vector<int32_t> ids, pos, mids;
  std::vector<int8_t> mask, seg, nsp;
};

NvidiaData make_data() {
  NvidiaData d;
  d.ids.assign(kN * kS, 0);
  d.mask.assign(kN * kS, 0);
  d.seg.assign(kN * kS, 0);
  d.pos.assign(kN * kP, 0);
  d.mids.assign(kN * kP, 0);
  d.nsp.assign(kN, 0);
  for (int n = 0; n < kN; ++n) {
    const int len = 10 + (n * 7) % (kS - 10), a_end = len / 3, m = 1 + n % kP;
    for (int i = 0; i < len; ++i) {
      d.ids[n * kS + i] = i == 0 ? 101 : (i == a_end || i == len - 1) ? 102 : 1000 + n * 31 + i;
      d.mask[n * kS + i] = 1;
      d.seg[n * kS + i] = i > a_end;
    }
    for (int k = 0; k < m && k + 1 < len; ++k) {
      d.pos[n * kP + k] = k + 1;
      d.mids[n * kP + k] = 5000 + n + k;
    }
    d.nsp[n] = n % 2;
  }
  return d;
}

void write_dataset(hid_t file, const char* name, hid_t file_type, hid_t mem_type, int rank,
                   const hsize_t* dims, const void* data) {
  const hid_t space = H5Screate_simple(rank, dims, nullptr);
  const hid_t dcpl = H5Pcreate(H5P_DATASET_CREATE);
  hsize_t chunk[2] = {8, rank == 2 ? dims[1] : 1};
  if (chunk[1] > 0) {  // an empty dimension cannot be chunked: stored contiguous
    H5Pset_chunk(dcpl, rank, chunk);
    H5Pset_deflate(dcpl, 4);
  }
  const hid_t ds = H5Dcreate2(file, name, file_type, space, H5P_DEFAULT, dcpl, H5P_DEFAULT);
  ASSERT_GE(ds, 0);
  ASSERT_GE(H5Dwrite(ds, mem_type, H5S_ALL, H5S_ALL, H5P_DEFAULT, data), 0);
  H5Dclose(ds);
  H5Pclose(dcpl);
  H5Sclose(space);
}

// `max_pred` other than kP: masked_lm_positions and masked_lm_ids of that width (d's are kP wide;
// only 0 is used, which writes none of them).
std::string write_nvidia_file(const std::string& path, const NvidiaData& d, hsize_t max_pred = kP) {
  const hid_t f = H5Fcreate(path.c_str(), H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT);
  const hsize_t ns[2] = {kN, kS}, np[2] = {kN, max_pred}, nn[1] = {kN};
  write_dataset(f, "input_ids", H5T_STD_I32LE, H5T_NATIVE_INT32, 2, ns, d.ids.data());
  write_dataset(f, "input_mask", H5T_STD_I8LE, H5T_NATIVE_INT8, 2, ns, d.mask.data());
  write_dataset(f, "segment_ids", H5T_STD_I8LE, H5T_NATIVE_INT8, 2, ns, d.seg.data());
  write_dataset(f, "masked_lm_positions", H5T_STD_I32LE, H5T_NATIVE_INT32, 2, np, d.pos.data());
  write_dataset(f, "masked_lm_ids", H5T_STD_I32LE, H5T_NATIVE_INT32, 2, np, d.mids.data());
  write_dataset(f, "next_sentence_labels", H5T_STD_I8LE, H5T_NATIVE_INT8, 1, nn, d.nsp.data());
  H5Fclose(f);
  return path;
}

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

TEST(ShardSet, NoFilesIsAClearError) {
  std::unique_ptr<ShardSet> set;
  const Status s = ShardSet::open({"/nonexistent/*.lbs"}, {}, &set);
  EXPECT_EQ(s.code(), StatusCode::kNotFound);
  EXPECT_NE(s.message().find("/nonexistent/*.lbs"), std::string::npos);
}

}  // namespace
}  // namespace lansbert
