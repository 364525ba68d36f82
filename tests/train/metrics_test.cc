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

// A fresh directory of this process for a test's files (`what` tells the tests apart).
std::string fresh_dir(const std::string& what) {
  const std::string dir = (std::filesystem::temp_directory_path() /
                           ("lansbert_metrics_" + what + "_" + std::to_string(::getpid()))).string();
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  return dir;
}

// What was written to `console` (a tmpfile), which it closes.
std::string read_and_close(FILE* console) {
  std::rewind(console);
  std::string text(4096, '\0');
  text.resize(std::fread(text.data(), 1, text.size(), console));
  std::fclose(console);
  return text;
}

// The bytes of the one event file under `dir` (its tags are plain strings there).
std::string event_bytes(const std::string& dir) {
  std::string events;
  for (const auto& e : std::filesystem::directory_iterator(dir)) {
    std::ifstream f(e.path(), std::ios::binary);
    events.assign(std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>());
  }
  return events;
}

// logging.noise_scale's window estimate: "B_noise" on the console line (a dash where the |G|²
// estimate was not positive), "noise" in the record (scale null then), TensorBoard tags.
TEST(MetricsNoise, TheEstimateOnTheConsoleInTheRecordAndAsTags) {
  const std::string dir = fresh_dir("noise");
  FILE* console = std::tmpfile();
  ASSERT_NE(console, nullptr);
  {
    MetricsLog log(console, dir + "/m.jsonl", dir + "/tb");
    MetricsRecord r;
    r.step = 1;
    r.noise_steps = 3;
    r.noise = estimate_noise_scale(2 + 80.0 / 8, 2 + 80.0 / 64, 8, 64);  // |G|² 2, tr(Σ) 80
    ASSERT_TRUE(log.write(r).is_ok());
    r.step = 2;
    r.noise = estimate_noise_scale(10, 0.1, 8, 64);  // a negative |G|² estimate
    ASSERT_TRUE(log.write(r).is_ok());
    r.step = 3;
    r.noise_steps = 0;  // nothing measured (or logging.noise_scale off)
    ASSERT_TRUE(log.write(r).is_ok());
  }
  const std::string text = read_and_close(console);
  EXPECT_NE(text.find("| gnorm 0.000 | B_noise 40 | 0.0 seq/s"), std::string::npos) << text;
  EXPECT_NE(text.find("| gnorm 0.000 | B_noise - | 0.0 seq/s"), std::string::npos) << text;
  EXPECT_EQ(text.find("B_noise", text.rfind("step 3/")), std::string::npos) << text;
  std::ifstream in(dir + "/m.jsonl");
  std::string line;
  ASSERT_TRUE(std::getline(in, line));
  nlohmann::json j = nlohmann::json::parse(line);
  EXPECT_NEAR(j["noise"]["scale"].get<double>(), 40, 1e-9);
  EXPECT_NEAR(j["noise"]["grad_sq"].get<double>(), 2, 1e-12);
  EXPECT_NEAR(j["noise"]["trace"].get<double>(), 80, 1e-9);
  EXPECT_EQ(j["noise"]["steps"], 3);
  ASSERT_TRUE(std::getline(in, line));
  j = nlohmann::json::parse(line);
  EXPECT_TRUE(j["noise"]["scale"].is_null()) << line;
  EXPECT_LT(j["noise"]["grad_sq"].get<double>(), 0);
  ASSERT_TRUE(std::getline(in, line));
  EXPECT_FALSE(nlohmann::json::parse(line).contains("noise"));
  const std::string events = event_bytes(dir + "/tb");
  for (const char* tag : {"optimizer/noise_scale", "optimizer/noise_grad_sq", "optimizer/noise_trace"})
    EXPECT_NE(events.find(tag), std::string::npos) << tag;
  std::filesystem::remove_all(dir);
}

// A held-out evaluation of named sets (evaluation.names): the console line of the sums says
// how many sets, a line each follows under the set's name; the metrics line carries the sums
// as before and "sets"; the event file holds eval/<name>/... tags beside eval/....
TEST(MetricsEval, NamedSetsOnTheConsoleInTheLineAndAsTags) {
  const std::string dir = fresh_dir("sets");
  EvalResult wiki, books, all;
  wiki.sequences = wiki.rows = 3, wiki.mlm_loss = 2.5, wiki.nsp_loss = 0.5, wiki.mlm_accuracy = 0.25;
  books.sequences = books.rows = 5, books.mlm_loss = 3.5, books.nsp_loss = 0.25, books.nsp_accuracy = 0.75;
  all.sequences = all.rows = 8, all.mlm_loss = 3, all.nsp_loss = 0.375;
  FILE* console = std::tmpfile();
  ASSERT_NE(console, nullptr);
  {
    MetricsLog log(console, dir + "/m.jsonl", dir + "/tb");
    ASSERT_TRUE(log.write_eval(10, 20, all, 1.5, {"wiki", "books"}, {wiki, books}).is_ok());
    ASSERT_TRUE(log.write_eval(20, 20, all, 1.5).is_ok());  // no names: as before
  }
  const std::string text = read_and_close(console);
  EXPECT_EQ(text,
            "eval after step 10/20 | loss 3.3750 | mlm_loss 3.0000 | mlm_acc 0.0000 | nsp_loss 0.3750 | nsp_acc "
            "0.0000 | 8 sequences in 1.5s, 2 sets:\n"
            "  wiki  | loss 3.0000 | mlm_loss 2.5000 | mlm_acc 0.2500 | nsp_loss 0.5000 | nsp_acc 0.0000 | 3 sequences\n"
            "  books | loss 3.7500 | mlm_loss 3.5000 | mlm_acc 0.0000 | nsp_loss 0.2500 | nsp_acc 0.7500 | 5 sequences\n"
            "eval after step 20/20 | loss 3.3750 | mlm_loss 3.0000 | mlm_acc 0.0000 | nsp_loss 0.3750 | nsp_acc "
            "0.0000 | 8 sequences in 1.5s\n");
  std::ifstream in(dir + "/m.jsonl");
  std::string line;
  ASSERT_TRUE(std::getline(in, line));
  const auto j = nlohmann::json::parse(line);
  EXPECT_EQ(line.rfind("{\"type\":\"eval\",\"step\":10,\"total_steps\":20,\"loss\":3.375,", 0), 0u) << line;
  EXPECT_EQ(j["sets"]["books"]["nsp_accuracy"], 0.75);
  EXPECT_EQ(j["sets"]["wiki"]["sequences"], 3);
  EXPECT_EQ(j["sets"]["wiki"]["loss"], 3.0);
  ASSERT_TRUE(std::getline(in, line));
  EXPECT_FALSE(nlohmann::json::parse(line).contains("sets"));
  const std::string events = event_bytes(dir + "/tb");
  for (const char* tag : {"eval/loss", "eval/wiki/loss", "eval/wiki/nsp_accuracy", "eval/books/mlm_loss"})
    EXPECT_NE(events.find(tag), std::string::npos) << tag;
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace lansbert
