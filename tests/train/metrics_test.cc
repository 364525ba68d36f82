// The trust-ratio summary of the metrics log: blocks without a ratio (NaN) are left out, the
// median is the lower middle, the extremes are named by tensor; the metrics file carries the
// summaries as objects and leaves them out when an update had none (AdamW); the window counts
// the tokens its micro-batches hold, for the record's fill.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "lansbert/train/metrics.h"

namespace lansbert {
namespace {

ParamTable four_blocks() {
  ParamTable t;
  t.add("a.weight", {2, 2}, ParamRole::kWeight);
  t.add("a.bias", {2}, ParamRole::kBias);
  t.add("b.weight", {2, 2}, ParamRole::kWeight);
  t.add("b.bias", {2}, ParamRole::kBias);
  return t;
}

TEST(TrustRatioSummary, SkipsBlocksWithoutOneAndNamesTheExtremes) {
  const ParamTable t = four_blocks();
  TrustRatioSummary s = summarize_trust_ratios({0.5, std::nan(""), 0.02, 3.0}, t);
  EXPECT_EQ(s.count, 3u);
  EXPECT_EQ(s.min, 0.02);
  EXPECT_EQ(s.median, 0.5);
  EXPECT_EQ(s.max, 3.0);
  EXPECT_EQ(s.min_tensor, "b.weight");
  EXPECT_EQ(s.max_tensor, "b.bias");
  s = summarize_trust_ratios({0.4, 0.1, 0.3, 0.2}, t);  // an even count: the lower middle
  EXPECT_EQ(s.median, 0.2);
  EXPECT_EQ(summarize_trust_ratios({}, t).count, 0u);  // AdamW
  EXPECT_EQ(summarize_trust_ratios({std::nan(""), std::nan(""), std::nan(""), std::nan("")}, t).count, 0u);
}

TEST(TrustRatioSummary, TheMetricsFileCarriesBothSummariesOrNeither) {
  const std::string path = (std::filesystem::temp_directory_path() /
                            ("lansbert_metrics_" + std::to_string(::getpid()) + ".jsonl")).string();
  std::filesystem::remove(path);
  const ParamTable t = four_blocks();
  {
    MetricsLog log(nullptr, path);
    MetricsRecord r;
    r.step = 1;
    r.fill = 0.625;
    r.trust = summarize_trust_ratios({0.5, 0.25, 0.125, 1.0}, t);
    r.trust_grad = summarize_trust_ratios({0.75, 0.5, 0.25, 2.0}, t);
    ASSERT_TRUE(log.write(r).is_ok());
    r.step = 2;
    r.trust = r.trust_grad = TrustRatioSummary{};
    ASSERT_TRUE(log.write(r).is_ok());
  }
  std::ifstream in(path);
  std::string line;
  ASSERT_TRUE(std::getline(in, line));
  const auto j = nlohmann::json::parse(line);
  EXPECT_EQ(j["trust_ratio"], nlohmann::json::parse(R"({"min": 0.125, "median": 0.25, "max": 1.0,
                                                        "min_tensor": "b.weight", "max_tensor": "b.bias"})"));
  EXPECT_EQ(j["trust_ratio_grad"]["median"], 0.5);
  EXPECT_EQ(j["fill"], 0.625);
  EXPECT_EQ(j["trust_ratio_grad"]["max_tensor"], "b.bias");
  ASSERT_TRUE(std::getline(in, line));
  const auto k = nlohmann::json::parse(line);
  EXPECT_FALSE(k.contains("trust_ratio"));
  EXPECT_FALSE(k.contains("trust_ratio_grad"));
  std::filesystem::remove(path);
}

TEST(MetricsWindow, CountsTheTokensOfEachMicroBatch) {
  MetricsWindow w;
  Batch b;
  b.resize(2, 4, 1);
  b.input_mask = {1, 1, 1, 0, 1, 1, 0, 0};  // 5 tokens in 8 positions
  w.add(ForwardResult{}, b);
  b.input_mask = {1, 1, 1, 1, 1, 0, 0, 0};
  w.add(ForwardResult{}, b);
  EXPECT_EQ(w.sums[MetricsWindow::kSequences], 4);
  EXPECT_EQ(w.sums[MetricsWindow::kTokens], 10);
  EXPECT_EQ(w.sums[MetricsWindow::kMicro], 2);
}

// logging.metrics_file: a run appends to a file of metrics (its own, whole or with a first
// record a failed write tore, one an evaluation began) and refuses anything else.
TEST(MetricsFile, AnExistingFileMustHoldMetrics) {
  const std::string dir = (std::filesystem::temp_directory_path() /
                           ("lansbert_metrics_check_" + std::to_string(::getpid()))).string();
  std::filesystem::create_directories(dir);
  auto with = [&](const std::string& name, const std::string& text) {
    const std::string path = dir + "/" + name;
    std::ofstream(path, std::ios::binary) << text;
    return check_metrics_file(path);
  };
  EXPECT_TRUE(check_metrics_file(dir + "/missing.jsonl").is_ok());
  EXPECT_TRUE(with("empty.jsonl", "").is_ok());
  {
    MetricsLog log(nullptr, dir + "/own.jsonl");
    MetricsRecord r;
    r.step = 1;
    ASSERT_TRUE(log.write(r).is_ok());
  }
  EXPECT_TRUE(check_metrics_file(dir + "/own.jsonl").is_ok());
  EXPECT_TRUE(with("eval.jsonl", "{\"type\":\"eval\",\"step\":5}\n").is_ok());
  EXPECT_TRUE(with("torn.jsonl", "{\"step\":50,\"total_st").is_ok());
  EXPECT_TRUE(with("torn-eval.jsonl", "{\"type\":\"eval\",\"st").is_ok());
  const std::vector<std::pair<std::string, std::string>> others = {
      {"config.yaml", "model: {preset: bert-tiny}\n"},
      {"shard.lbs", std::string("LBSHARD\0\x02\0\0\0", 12)},
      {"other.jsonl", "{\"text\": \"a document\"}\n"}};
  for (const auto& [name, text] : others) {
    const Status st = with(name, text);
    EXPECT_EQ(st.code(), StatusCode::kInvalidArgument) << name;
    EXPECT_NE(st.message().find("logging.metrics_file: " + dir + "/" + name +
                                " exists and its first line is not a lansbert metrics record"),
              std::string::npos)
        << st.message();
  }
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace lansbert
