// `lansbert convert` (data/hdf5_convert.h): NVIDIA HDF5 shards rewritten as lansbert shards
// read back as exactly the same samples; rows a lansbert record cannot hold exactly are
// refused naming the file, sample and field; a failed or stopped conversion leaves --out as
// it was.
#include "lansbert/data/hdf5_convert.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>

#include "lansbert/data/dataset.h"
#include "nvidia_hdf5_file.h"
#include "test_util.h"

namespace lansbert {
namespace {

namespace fs = std::filesystem;
using testing::kP;
using testing::kS;
using testing::make_data;
using testing::NvidiaData;
using testing::write_nvidia_file;

Hdf5ConvertOptions options(const std::string& in, const std::string& out) {
  Hdf5ConvertOptions o;
  o.inputs = {in};
  o.out_dir = out;
  o.vocab.vocab_size = 30522;
  o.vocab.vocab_hash = 0x0123456789abcdefULL;
  o.vocab_path = "vocab.txt";  // named in the message of an id past it
  return o;
}

std::string contents(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>()};
}

// Everything in `dir` (names and bytes), to show a refused run changed nothing.
std::map<std::string, std::string> snapshot(const std::string& dir) {
  std::map<std::string, std::string> m;
  for (const auto& e : fs::directory_iterator(dir)) m[e.path().filename().string()] = contents(e.path().string());
  return m;
}

TEST(Hdf5Convert, ConvertedShardsReadBackAsTheSameSamples) {
  const std::string dir = testing::scratch_dir("hdf5_convert");
  NvidiaData a = make_data(), b = make_data();
  for (auto& id : b.ids)
    if (id >= 1000) id += 7;  // another file's samples
  b.nsp[0] = 1 - b.nsp[0];
  // A sequence of sentence A alone (segment ids all 0) and a 2-byte-wide id past 32767.
  for (int i = 0; i < kS; ++i) a.seg[3 * kS + i] = 0;
  a.ids[4 * kS + 1] = 30000;
  fs::create_directories(dir + "/in");
  write_nvidia_file(dir + "/in/wiki_training_0.hdf5", a);
  write_nvidia_file(dir + "/in/wiki_training_1.hdf5", b);
  Hdf5ConvertOptions o = options(dir + "/in", dir + "/out");
  std::vector<std::string> files;
  o.on_file = [&](const std::string& from, const std::string& to, int64_t n) {
    files.push_back(fs::path(from).filename().string() + " " + fs::path(to).filename().string() + " " +
                    std::to_string(n));
  };
  Hdf5ConvertStats st;
  const Status s = convert_hdf5_shards(o, &st);
  ASSERT_TRUE(s.is_ok()) << s.to_string();
  EXPECT_EQ(st.files, 2);
  EXPECT_EQ(st.samples, 2 * testing::kN);
  EXPECT_EQ(files, (std::vector<std::string>{"wiki_training_0.hdf5 shard-00000.lbs 37",
                                              "wiki_training_1.hdf5 shard-00001.lbs 37"}));
  std::unique_ptr<ShardSet> h5, lbs;
  ASSERT_TRUE(ShardSet::open({dir + "/in"}, {}, &h5).is_ok());
  ShardSetOptions with_vocab;
  with_vocab.vocab_hash = o.vocab.vocab_hash;  // the header records the vocabulary given
  const Status opened = ShardSet::open({dir + "/out"}, with_vocab, &lbs);
  ASSERT_TRUE(opened.is_ok()) << opened.to_string();
  ASSERT_EQ(lbs->num_shards(), 2u);
  ASSERT_EQ(lbs->count(), h5->count());
  EXPECT_FALSE(lbs->dynamic_masking());
  EXPECT_EQ(lbs->info()->vocab_size, 30522);
  EXPECT_EQ(st.bytes_written, fs::file_size(dir + "/out/shard-00000.lbs") + fs::file_size(dir + "/out/shard-00001.lbs"));
  Batch x, y;
  x.resize(1, kS, kP);
  y.resize(1, kS, kP);
  for (int64_t i = 0; i < h5->count(); ++i) {
    SCOPED_TRACE(i);
    ASSERT_TRUE(h5->read(i, &x, 0).is_ok());
    ASSERT_TRUE(lbs->read(i, &y, 0).is_ok());
    EXPECT_EQ(x.input_ids, y.input_ids);
    EXPECT_EQ(x.segment_ids, y.segment_ids);
    EXPECT_EQ(x.input_mask, y.input_mask);
    EXPECT_EQ(x.masked_positions, y.masked_positions);
    EXPECT_EQ(x.masked_ids, y.masked_ids);
    EXPECT_EQ(x.nsp_labels, y.nsp_labels);
  }
  EXPECT_EQ(snapshot(dir + "/out").size(), 2u) << "only the shards are left in --out";
}

// Each row a lansbert record cannot hold exactly, and what the message names.
TEST(Hdf5Convert, RowsARecordCannotHoldAreRefusedByField) {
  struct Case {
    const char* name;
    void (*edit)(NvidiaData&);
    const char* expect;
  };
  // Sample 5 of make_data: 45 tokens, sentence A to [15].
  const Case cases[] = {
      {"a gap in input_mask", [](NvidiaData& d) { d.mask[5 * kS + 20] = 0; },
       "sample 5: input_mask[21] = 1 after input_mask[20] = 0"},
      {"an id in the padding", [](NvidiaData& d) { d.ids[5 * kS + 100] = 7; },
       "sample 5: input_ids[100] = 7 in the padding (input_mask 0)"},
      {"a segment in the padding", [](NvidiaData& d) { d.seg[5 * kS + 100] = 1; },
       "sample 5: segment_ids[100] = 1 in the padding"},
      {"sentence B first", [](NvidiaData& d) { d.seg[5 * kS + 0] = 1; },
       "sample 5: segment_ids[0] = 1: sentence A must come first"},
      {"A again after B", [](NvidiaData& d) { d.seg[5 * kS + 30] = 0; },
       "sample 5: segment_ids[30] = 0 after sentence B began at [16]"},
      {"an id past the vocabulary", [](NvidiaData& d) { d.ids[5 * kS + 3] = 30522; },
       "sample 5: input_ids[3] = 30522 is outside [0, 30522) (the vocabulary: --vocab vocab.txt has 30522 tokens; "
       "give convert the vocab.txt the files were made with)"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    const std::string dir = testing::scratch_dir("hdf5_convert_bad");
    NvidiaData d = make_data();
    c.edit(d);
    fs::create_directories(dir + "/in");
    write_nvidia_file(dir + "/in/wiki_training_0.hdf5", d);
    // An earlier conversion's shard in --out: a refused run must leave it as it was.
    fs::create_directories(dir + "/out");
    { std::ofstream(dir + "/out/shard-00000.lbs") << "an earlier run's shard"; }
    const auto before = snapshot(dir + "/out");
    Hdf5ConvertStats st;
    const Status s = convert_hdf5_shards(options(dir + "/in", dir + "/out"), &st);
    EXPECT_FALSE(s.is_ok());
    EXPECT_NE(s.message().find(dir + "/in/wiki_training_0.hdf5: sample 5: "), std::string::npos) << s.message();
    EXPECT_NE(s.message().find(c.expect), std::string::npos) << s.message();
    EXPECT_EQ(snapshot(dir + "/out"), before);
  }
}

TEST(Hdf5Convert, ALansbertShardOrAStopLeavesOutAsItWas) {
  const std::string dir = testing::scratch_dir("hdf5_convert_stop");
  fs::create_directories(dir + "/in");
  write_nvidia_file(dir + "/in/wiki_training_0.hdf5", make_data());
  Hdf5ConvertStats st;
  ASSERT_TRUE(convert_hdf5_shards(options(dir + "/in", dir + "/out"), &st).is_ok());
  const auto before = snapshot(dir + "/out");
  // Stopped (SIGTERM) before the first sample.
  Hdf5ConvertOptions o = options(dir + "/in", dir + "/out");
  o.stop = [] { return 15; };
  const Status stopped = convert_hdf5_shards(o, &st);
  EXPECT_EQ(stopped.code(), StatusCode::kInterrupted) << stopped.to_string();
  EXPECT_NE(stopped.message().find("convert: stopped by SIGTERM; " + dir + "/out is as it was before the run"),
            std::string::npos) << stopped.message();
  EXPECT_EQ(snapshot(dir + "/out"), before);
  // Its own output is not HDF5.
  const Status lbs = convert_hdf5_shards(options(dir + "/out", dir + "/again"), &st);
  EXPECT_EQ(lbs.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(lbs.message().find(dir + "/out/shard-00000.lbs: a lansbert shard, not an HDF5 file"), std::string::npos)
      << lbs.message();
  EXPECT_FALSE(fs::exists(dir + "/again"));
}

TEST(Hdf5Convert, MaskedSlotsMustBeFilledFromTheFirst) {
  Batch b;
  b.resize(1, 8, 3);
  for (int i = 0; i < 5; ++i) b.input_mask[i] = 1;
  b.input_ids = {101, 7, 102, 8, 102, 0, 0, 0};
  b.segment_ids = {0, 0, 0, 1, 1, 0, 0, 0};
  b.masked_positions = {1, 0, 3};
  b.masked_ids = {7, Batch::kIgnore, 8};
  Instance inst;
  const Status s = batch_row_to_instance(b, 0, &inst);
  EXPECT_NE(s.message().find("masked_lm_ids[2] = 8 after an empty slot [1]"), std::string::npos) << s.message();
  b.masked_ids[2] = Batch::kIgnore;  // an empty slot that names a position reads back at 0
  const Status placed = batch_row_to_instance(b, 0, &inst);
  EXPECT_NE(placed.message().find("masked_lm_positions[2] = 3 with masked_lm_ids[2] = -1"), std::string::npos)
      << placed.message();
  b.masked_positions[2] = 0;
  ASSERT_TRUE(batch_row_to_instance(b, 0, &inst).is_ok());
  EXPECT_EQ(inst.tokens, (std::vector<int32_t>{101, 7, 102, 8, 102}));
  EXPECT_EQ(inst.a_end, 2);
  EXPECT_EQ(inst.masked_positions, std::vector<int32_t>{1});
  EXPECT_EQ(inst.masked_ids, std::vector<int32_t>{7});
}

}  // namespace
}  // namespace lansbert
