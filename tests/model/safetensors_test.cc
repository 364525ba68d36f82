// safetensors: round trip of a parameter table; malformed files (truncated, oversized
// header or offsets, bad JSON, wrong sizes, overlaps) are clear errors; random corruption
// of a valid file never crashes; loading checks names and shapes.
#include <gtest/gtest.h>

#include <cstdio>
#include <filesystem>
#include <random>

#include "lansbert/core/file_io.h"
#include "lansbert/kernels/half.h"
#include "lansbert/model/bert_config.h"
#include "lansbert/model/safetensors.h"

namespace lansbert {
namespace {

namespace fs = std::filesystem;

class SafetensorsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("lansbert_st_" + std::to_string(::getpid()) + "_" +
                                        ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::create_directories(dir_);
    table_.add("a.weight", {3, 5}, ParamRole::kWeight);
    table_.add("a.bias", {3}, ParamRole::kBias);
    table_.add("ln.weight", {7}, ParamRole::kLayerNormGamma);
    params_.assign(table_.total_elements(), 0.0f);
    for (const ParamEntry& e : table_.entries())
      for (size_t i = 0; i < e.numel; ++i) params_[e.offset + i] = float(e.offset + i) * 0.5f - 3.0f;
  }
  void TearDown() override { fs::remove_all(dir_); }
  std::string path(const std::string& n) const { return (dir_ / n).string(); }
  std::string valid_bytes() {
    const std::string p = path("valid.safetensors");
    EXPECT_TRUE(write_safetensors(p, table_, params_.data(), {{"step", "12"}}).is_ok());
    std::string b;
    EXPECT_TRUE(read_file(p, &b).is_ok());
    return b;
  }
  // Rebuilds a file from a header string and a data section.
  static std::string make_file(const std::string& header, size_t data_bytes) {
    std::string out(8, '\0');
    uint64_t n = header.size();
    for (int i = 0; i < 8; ++i) out[i] = char((n >> (8 * i)) & 0xff);
    return out + header + std::string(data_bytes, '\0');
  }
  Status parse(const std::string& bytes) {
    SafetensorsFile f;
    return parse_safetensors(bytes, "x.safetensors", &f);
  }

  fs::path dir_;
  ParamTable table_;
  std::vector<float> params_;
};

TEST_F(SafetensorsTest, RoundTripKeepsNamesShapesValuesAndMetadata) {
  const std::string p = path("m.safetensors");
  ASSERT_TRUE(write_safetensors(p, table_, params_.data(), {{"step", "12"}}).is_ok());
  SafetensorsFile f;
  ASSERT_TRUE(read_safetensors(p, &f).is_ok());
  EXPECT_EQ(f.metadata.at("step"), "12");
  EXPECT_EQ(f.tensors.at("a.weight").shape, (std::vector<int64_t>{3, 5}));
  EXPECT_EQ(f.data_start % 8, 0u);
  std::vector<float> back(table_.total_elements(), 0.0f);
  ASSERT_TRUE(load_params(f, table_, back.data()).is_ok());
  EXPECT_EQ(back, params_);
}

// 16-bit writes: half the data bytes, each value the kernels' round-to-nearest of the fp32
// one (so a read back equals round_to_bf16 / round_to_fp16 exactly, subnormal fp16 included);
// an fp16 write of a value beyond 65504 is refused, naming the tensor, and writes nothing.
TEST_F(SafetensorsTest, HalfWritesHoldTheRoundedValuesAndRefuseOverflow) {
  params_[1] = 1.0f / 3.0f;
  params_[2] = 3.0e-6f;  // fp16 subnormal
  params_[3] = 65519.0f;  // rounds down to 65504 in fp16
  for (const StDtype dtype : {StDtype::kBF16, StDtype::kF16}) {
    const std::string p = path(dtype == StDtype::kBF16 ? "b.safetensors" : "h.safetensors");
    ASSERT_TRUE(write_safetensors(p, table_, params_.data(), {}, dtype).is_ok());
    SafetensorsFile f;
    ASSERT_TRUE(read_safetensors(p, &f).is_ok());
    EXPECT_EQ(f.tensors.at("a.weight").dtype, dtype);
    EXPECT_EQ(f.tensors.at("a.weight").end - f.tensors.at("a.weight").begin, 15u * 2);
    std::vector<float> back(table_.total_elements(), 0.0f);
    ASSERT_TRUE(load_params(f, table_, back.data()).is_ok());
    for (size_t i = 0; i < params_.size(); ++i)
      ASSERT_EQ(back[i], dtype == StDtype::kBF16 ? kern::round_to_bf16(params_[i]) : kern::round_to_fp16(params_[i]))
          << "element " << i;
  }
  const ParamEntry* bias = nullptr;
  for (const ParamEntry& e : table_.entries())
    if (e.name == "a.bias") bias = &e;
  ASSERT_NE(bias, nullptr);
  params_[bias->offset + 1] = 70000.0f;
  const std::string p = path("over.safetensors");
  const Status st = write_safetensors(p, table_, params_.data(), {}, StDtype::kF16);
  ASSERT_FALSE(st.is_ok());
  EXPECT_NE(st.message().find("tensor 'a.bias' element 1 is 70000"), std::string::npos) << st.message();
  EXPECT_FALSE(fs::exists(p));
  EXPECT_TRUE(write_safetensors(p, table_, params_.data(), {}, StDtype::kBF16).is_ok());  // bf16 holds it
}

TEST_F(SafetensorsTest, TruncatedFilesAreRejected) {
  const std::string b = valid_bytes();
  EXPECT_NE(parse(b.substr(0, 5)).message().find("shorter than the 8-byte header length"), std::string::npos);
  EXPECT_NE(parse(b.substr(0, 40)).message().find("exceeds the file size"), std::string::npos);
  Status s = parse(b.substr(0, b.size() - 4));
  EXPECT_EQ(s.code(), StatusCode::kCorrupt);
  EXPECT_NE(s.message().find("outside the data section"), std::string::npos) << s.message();
  EXPECT_NE(s.message().find("x.safetensors"), std::string::npos);
}

TEST_F(SafetensorsTest, OversizedHeaderLengthAndOffsetsAreRejected) {
  std::string b = valid_bytes();
  for (int i = 0; i < 8; ++i) b[i] = char(0xff);
  EXPECT_NE(parse(b).message().find("exceeds the 100 MB limit"), std::string::npos);
  const std::string h = R"({"t":{"dtype":"F32","shape":[2],"data_offsets":[0,18446744073709551615]}})";
  EXPECT_NE(parse(make_file(h, 8)).message().find("outside the data section"), std::string::npos);
  const std::string big = R"({"t":{"dtype":"F32","shape":[4294967296,4294967296],"data_offsets":[0,8]}})";
  EXPECT_NE(parse(make_file(big, 8)).message().find("overflows"), std::string::npos);
}

TEST_F(SafetensorsTest, BadJsonAndBadFieldsAreRejected) {
  EXPECT_NE(parse(make_file("{not json", 0)).message().find("not valid JSON"), std::string::npos);
  EXPECT_NE(parse(make_file("[1,2]", 0)).message().find("not a JSON object"), std::string::npos);
  EXPECT_NE(parse(make_file(R"({"t":{"dtype":"Q8","shape":[1],"data_offsets":[0,1]}})", 1)).message().find("unknown dtype"),
            std::string::npos);
  EXPECT_NE(parse(make_file(R"({"t":{"dtype":"F32","shape":[-1],"data_offsets":[0,4]}})", 4)).message().find("shape entry"),
            std::string::npos);
  EXPECT_NE(parse(make_file(R"({"t":{"dtype":"F32","shape":[3],"data_offsets":[0,8]}})", 8)).message().find("need 12"),
            std::string::npos);
  EXPECT_NE(parse(make_file(R"({"t":{"dtype":"F32","shape":[2]}})", 8)).message().find("data_offsets"), std::string::npos);
  EXPECT_NE(parse(make_file(R"({"__metadata__":{"k":1}})", 0)).message().find("not a string"), std::string::npos);
  const std::string overlap =
      R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},"b":{"dtype":"F32","shape":[2],"data_offsets":[4,12]}})";
  EXPECT_NE(parse(make_file(overlap, 12)).message().find("overlap"), std::string::npos);
}

TEST_F(SafetensorsTest, RandomCorruptionNeverCrashes) {
  const std::string b = valid_bytes();
  std::mt19937 g(1);
  int rejected = 0;
  for (int trial = 0; trial < 2000; ++trial) {
    std::string c = b;
    const int flips = 1 + int(g() % 4);
    for (int i = 0; i < flips; ++i) c[g() % std::min<size_t>(c.size(), 400)] = char(g());
    if (g() % 3 == 0) c.resize(g() % c.size());
    SafetensorsFile f;
    Status s = parse_safetensors(c, "fuzz", &f);
    if (!s.is_ok()) {
      ++rejected;
      continue;
    }
    std::vector<float> back(table_.total_elements());
    (void)load_params(f, table_, back.data());  // may fail cleanly; must not crash
  }
  EXPECT_GT(rejected, 1000);
}

TEST_F(SafetensorsTest, LoadChecksMissingUnexpectedAndShapes) {
  const std::string p = path("m.safetensors");
  ASSERT_TRUE(write_safetensors(p, table_, params_.data(), {}).is_ok());
  SafetensorsFile f;
  ASSERT_TRUE(read_safetensors(p, &f).is_ok());
  ParamTable bigger = table_;
  bigger.add("b.weight", {2, 2}, ParamRole::kWeight);
  std::vector<float> buf(bigger.total_elements());
  Status s = load_params(f, bigger, buf.data());
  EXPECT_EQ(s.code(), StatusCode::kNotFound);
  EXPECT_NE(s.message().find("missing tensor 'b.weight'"), std::string::npos);

  ParamTable smaller;
  smaller.add("a.weight", {3, 5}, ParamRole::kWeight);
  s = load_params(f, smaller, buf.data());
  EXPECT_NE(s.message().find("unexpected tensor"), std::string::npos);
  EXPECT_TRUE(load_params(f, smaller, buf.data(), true).is_ok());

  ParamTable reshaped;
  reshaped.add("a.weight", {5, 3}, ParamRole::kWeight);
  s = load_params(f, reshaped, buf.data(), true);
  EXPECT_NE(s.message().find("has shape [3,5], the model needs [5,3]"), std::string::npos) << s.message();
}

TEST_F(SafetensorsTest, MissingFileIsNotFound) {
  SafetensorsFile f;
  Status s = read_safetensors(path("nope.safetensors"), &f);
  EXPECT_EQ(s.code(), StatusCode::kNotFound);
  EXPECT_NE(s.message().find("nope.safetensors"), std::string::npos);
}

}  // namespace
}  // namespace lansbert
