// logging.noise_scale end to end on a tiny model: the gradient noise scale each window logs
// (optim/noise_scale.h) from the first micro-batch of every update and the whole update.
// Where every sample is the same (and dropout is off), every micro-batch has the update's
// gradient and there is no noise to find: the estimate of tr(Σ) is 0 to rounding, with and
// without loss scaling, which fails if the micro-batch's gradient were taken with the wrong
// factor (the 1/accumulation or the loss scale left in) or after other micro-batches were
// added. Real data has noise: a positive scale. One micro-batch per update is refused.
#include <gtest/gtest.h>

#include <cmath>
#include <fstream>
#include <nlohmann/json.hpp>

#include "lansbert/optim/noise_scale.h"
#include "lansbert/train/trainer.h"
#include "train_run_util.h"
#include "train_test_util.h"

namespace lansbert {
namespace {

using testing::scratch;
using testing::train;

// The "noise" objects of the run's metrics lines, in order.
std::vector<nlohmann::json> noise_records(const TrainConfig& c) {
  std::vector<nlohmann::json> out;
  std::ifstream f(c.metrics_path());
  for (std::string l; std::getline(f, l);) {
    const nlohmann::json j = nlohmann::json::parse(l);
    if (j.contains("noise")) out.push_back(j["noise"]);
  }
  return out;
}

TrainConfig noise_config(const std::string& data, const std::string& ckpt) {
  TrainConfig c = testing::tiny_config(data, ckpt, 10);
  c.batch.micro_batch = 8;  // 4 per update of 32
  c.model.hidden_dropout = 0;
  c.model.attention_dropout = 0;
  c.logging.noise_scale = true;
  return c;
}

TEST(NoiseScaleRun, SameSamplesEverywhereHaveNoNoise) {
  const std::string data = scratch("same");
  ASSERT_FALSE(testing::write_tiny_shards(data, 40, 32, 5, 7, false, /*repeat_first=*/true).empty());
  for (const char* loss_scale : {"none", "static"}) {
    TrainConfig c = noise_config(data, scratch(std::string("same_run_") + loss_scale));
    c.precision.loss_scale = loss_scale;
    c.precision.scaler.initial_scale = 1024;
    std::string key;
    ASSERT_TRUE(c.validate(1, &key).is_ok()) << key;
    TrainResult r;
    ASSERT_TRUE(train(c, &r).is_ok());
    const std::vector<nlohmann::json> noise = noise_records(c);
    ASSERT_EQ(noise.size(), 2u) << loss_scale;  // steps 5 and 10
    for (const nlohmann::json& n : noise) {
      EXPECT_EQ(n["steps"], 5) << n;
      const double grad_sq = n["grad_sq"], trace = n["trace"];
      EXPECT_GT(grad_sq, 0) << n;
      // tr(Σ)/|G|² per sample: 0 but for float rounding (measured 5e-8 here).
      EXPECT_LT(std::abs(trace / grad_sq), 1e-4) << loss_scale << ": " << n;
      std::printf("%s: %s\n", loss_scale, n.dump().c_str());
    }
  }
}

// The estimate of step 1 against the two norms it must have been made from, measured apart:
// |G_B|² is the update's own logged gradient norm, and |G_b|² that of a run whose whole update
// is the first micro-batch (the same first 8 samples of the same order, the same initial
// weights, no dropout: the same gradient, only scaled by a power of two). Solving the
// estimator for them needs the right b and B, the unscaled first micro-batch alone, and the
// update's norm: any slip there fails it.
TEST(NoiseScaleRun, TheEstimateIsMadeOfTheMicroBatchsAndTheUpdatesNorms) {
  const std::string data = scratch("norms");
  ASSERT_FALSE(testing::write_tiny_shards(data).empty());
  TrainConfig a = noise_config(data, scratch("norms_a"));
  a.logging.every_steps = 1;
  a.schedule.total_steps = 2;
  TrainConfig one = a;
  one.checkpoint.dir = scratch("norms_b");
  one.batch.global_batch = 8;  // = micro_batch: the first micro-batch is the update
  one.logging.noise_scale = false;
  TrainResult r;
  ASSERT_TRUE(train(a, &r).is_ok());
  ASSERT_TRUE(train(one, &r).is_ok());
  auto first_record = [](const TrainConfig& c) {
    std::ifstream f(c.metrics_path());
    std::string line;
    std::getline(f, line);
    return nlohmann::json::parse(line);
  };
  const nlohmann::json ra = first_record(a), rb = first_record(one);
  ASSERT_EQ(ra["step"], 1);
  ASSERT_EQ(rb["step"], 1);
  const double grad_sq = ra["noise"]["grad_sq"], trace = ra["noise"]["trace"];
  const double big = std::pow(ra["grad_norm"].get<double>(), 2), small = std::pow(rb["grad_norm"].get<double>(), 2);
  std::printf("|G_B|^2 %.9g = %.9g, |G_b|^2 %.9g = %.9g\n", big, grad_sq + trace / 32, small, grad_sq + trace / 8);
  EXPECT_NEAR(grad_sq + trace / 32, big, 1e-6 * big);
  EXPECT_NEAR(grad_sq + trace / 8, small, 1e-6 * small);
  EXPECT_GT(small, big);  // a batch of 8 is noisier than one of 32
}

// The moving averages: a run logging every update with noise_scale_updates 1 gives each
// update's |G_b|² and |G_B|² (solved from its estimate); the same run with
// noise_scale_updates 2 must report at step 3 their averages weighted 1/4, 1/2, 1, whether it
// logs every third update (one window) or every update (the averages carry over windows).
TEST(NoiseScaleRun, TheEstimateAveragesRecentUpdatesWithDecayingWeights) {
  const std::string data = scratch("avg");
  ASSERT_FALSE(testing::write_tiny_shards(data).empty());
  TrainConfig each = noise_config(data, scratch("avg_each"));
  each.schedule.total_steps = 3;
  each.logging.every_steps = 1;
  each.logging.noise_scale_updates = 1;
  TrainConfig avg = each;
  avg.checkpoint.dir = scratch("avg_three");
  avg.logging.every_steps = 3;
  avg.logging.noise_scale_updates = 2;
  TrainConfig carried = avg;
  carried.checkpoint.dir = scratch("avg_carried");
  carried.logging.every_steps = 1;
  TrainResult r;
  ASSERT_TRUE(train(each, &r).is_ok());
  ASSERT_TRUE(train(avg, &r).is_ok());
  ASSERT_TRUE(train(carried, &r).is_ok());
  const std::vector<nlohmann::json> steps = noise_records(each), three = noise_records(avg),
                                    windows = noise_records(carried);
  ASSERT_EQ(steps.size(), 3u);
  ASSERT_EQ(three.size(), 1u);
  ASSERT_EQ(windows.size(), 3u);
  double small = 0, big = 0, weights = 0, w = 0.25;
  for (const nlohmann::json& n : steps) {
    const double grad_sq = n["grad_sq"], trace = n["trace"];
    small += w * (grad_sq + trace / 8);
    big += w * (grad_sq + trace / 32);
    weights += w;
    w *= 2;
  }
  const NoiseScaleEstimate want = estimate_noise_scale(small / weights, big / weights, 8, 32);
  for (const nlohmann::json& got : {three[0], windows[2]}) {
    EXPECT_NEAR(got["grad_sq"].get<double>(), want.grad_sq, 1e-9 * std::abs(want.grad_sq)) << got;
    EXPECT_NEAR(got["trace"].get<double>(), want.trace, 1e-9 * std::abs(want.trace)) << got;
  }
  EXPECT_EQ(three[0]["steps"], 3);
  EXPECT_EQ(windows[2]["steps"], 1);
}

TEST(NoiseScaleRun, RealDataHasNoiseAndOneMicroBatchIsRefused) {
  const std::string data = scratch("real");
  ASSERT_FALSE(testing::write_tiny_shards(data).empty());
  TrainConfig c = noise_config(data, scratch("real_run"));
  TrainResult r;
  ASSERT_TRUE(train(c, &r).is_ok());
  const std::vector<nlohmann::json> noise = noise_records(c);
  ASSERT_EQ(noise.size(), 2u);
  for (const nlohmann::json& n : noise) {
    ASSERT_TRUE(n["scale"].is_number()) << n;
    EXPECT_GT(n["scale"].get<double>(), 1) << n;  // measured 2.1 and 2.3: far from the no-noise run's 5e-8
    EXPECT_GT(n["trace"].get<double>(), 0) << n;
    std::printf("real: %s\n", n.dump().c_str());
  }
  // Without logging.noise_scale no record carries one.
  TrainConfig off = c;
  off.logging.noise_scale = false;
  off.checkpoint.dir = scratch("real_off");
  ASSERT_TRUE(train(off, &r).is_ok());
  EXPECT_TRUE(noise_records(off).empty());
  TrainConfig one = c;
  one.batch.micro_batch = 32;
  std::string key;
  const Status st = one.validate(1, &key);
  EXPECT_EQ(key, "logging.noise_scale");
  EXPECT_NE(st.message().find("needs 2 or more micro-batches per update on each rank"), std::string::npos)
      << st.message();
  EXPECT_TRUE(one.validate(1, &key).is_ok() == false);
  one.batch.micro_batch = 16;
  EXPECT_FALSE(one.validate(2, &key).is_ok());  // 2 ranks x 16: one micro-batch each
  EXPECT_TRUE(one.validate(1, &key).is_ok()) << key;
}

}  // namespace
}  // namespace lansbert
