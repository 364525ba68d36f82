// The held-out evaluation during training (data.eval, evaluation.*), end to end on a tiny model
// and tiny synthetic shards: when it runs, that `lansbert eval` (run_eval) repeats its numbers
// on the final checkpoint, that a packed run evaluates packed, and that a failed evaluation
// ends the run after that step's checkpoint.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "lansbert/train/checkpoint.h"
#include "lansbert/train/evaluate.h"
#include "lansbert/train/trainer.h"
#include "tiny_shards_fixture.h"
#include "train_run_util.h"
#include "train_test_util.h"

namespace lansbert {
namespace {
namespace fs = std::filesystem;

using testing::scratch;
using testing::train;
using TrainerTest = testing::TinyShardsTest;

// data.format hdf5 applies NVIDIA's training-file rule to data.train only: its held-out files
// (*_test_*) are data.eval's. lbs and hdf5 take only their kind; auto either, by magic.
TEST(ShardSetOptionsOfTheConfig, TrainingRuleOnlyForTrainingData) {
  TrainConfig cfg;
  for (const char* format : {"auto", "lbs", "hdf5"}) {
    cfg.data.format = format;
    const ShardFormat want = cfg.data.format == "lbs"    ? ShardFormat::kLbs
                             : cfg.data.format == "hdf5" ? ShardFormat::kHdf5
                                                         : ShardFormat::kAny;
    EXPECT_EQ(shard_set_options(cfg, true).format, want) << format;
    EXPECT_EQ(shard_set_options(cfg, false).format, want) << format;
    EXPECT_EQ(shard_set_options(cfg, true).training_only, want == ShardFormat::kHdf5) << format;
    EXPECT_FALSE(shard_set_options(cfg, false).training_only) << format;
  }
}

// A run ended early by --stop-at-step evaluates only at evaluation.every_steps, as a signal
// does; resumed, it evaluates where the uninterrupted run would have (10 and the last, 12).
TEST_F(TrainerTest, StopAtStepDoesNotEvaluateWhereItStops) {
  TrainConfig c = testing::tiny_config(*data_, scratch("eval_stop"), 12);
  c.data.eval = {*data_ + "/shards/*.lbs"};
  c.evaluation.every_steps = 5;
  c.evaluation.max_sequences = 32;
  TrainResult r;
  ASSERT_TRUE(train(c, &r, "", 7).is_ok());
  EXPECT_EQ(r.step, 7);
  EXPECT_EQ(r.total_steps, 12);
  EXPECT_EQ(r.evaluations, 1);  // step 5 only
  TrainResult rest;
  ASSERT_TRUE(train(c, &rest, "latest").is_ok());
  EXPECT_EQ(rest.evaluations, 2);  // steps 10 and 12
}

// run_eval's options for the evaluation a run does itself: its data.eval, micro-batch and
// evaluation.max_sequences.
EvalOptions run_own_eval(const TrainConfig& c) {
  EvalOptions eo;
  eo.data = c.data.eval;
  eo.micro_batch = c.batch.micro_batch;
  eo.max_sequences = c.evaluation.max_sequences;
  return eo;
}

// With data.packing the evaluation packs too: run_eval packed gives the logged numbers bit for
// bit, and unpacked the same to rounding (the same sequences in more rows).
TEST_F(TrainerTest, PackedRunEvaluatesPacked) {
  TrainConfig c = testing::tiny_config(*data_, scratch("eval-packed"), 5);
  c.data.eval = {*data_ + "/shards/*.lbs"};
  c.data.packing = true;
  c.evaluation.every_steps = 5;
  c.evaluation.max_sequences = 70;
  std::string key;
  ASSERT_TRUE(c.validate(1, &key).is_ok()) << key;
  TrainResult r;
  ASSERT_TRUE(train(c, &r).is_ok());
  ASSERT_EQ(r.evaluations, 1);
  // The run's own evaluation packed: its 70 sequences in fewer rows, as its metrics line says.
  EXPECT_EQ(r.eval.sequences, 70);
  EXPECT_GT(r.eval.rows, 0);
  EXPECT_LT(r.eval.rows, r.eval.sequences);
  std::ifstream metrics(c.metrics_path());
  int eval_lines = 0;
  for (std::string l; std::getline(metrics, l);) {
    const nlohmann::json j = nlohmann::json::parse(l);
    if (j.value("type", "") != "eval") continue;
    ++eval_lines;
    EXPECT_EQ(j.at("rows").get<int64_t>(), r.eval.rows);
  }
  EXPECT_EQ(eval_lines, 1);
  BertConfig mc;
  ASSERT_TRUE(c.resolve_model(&mc).is_ok());
  EvalOptions eo = run_own_eval(c);
  eo.packing = true;
  eo.dump_batch = scratch("eval-packed-dump") + "/batch.json";
  EvalResult packed, plain;
  ASSERT_TRUE(run_eval(mc, c.checkpoint.dir + "/final", eo, &packed).is_ok());
  std::ifstream dump(eo.dump_batch);
  const nlohmann::json first = nlohmann::json::parse(dump);
  EXPECT_LT(first.at("rows").get<int>(), first.at("batch").get<int>());  // it did pack
  eo.packing = false;
  eo.dump_batch.clear();
  ASSERT_TRUE(run_eval(mc, c.checkpoint.dir + "/final", eo, &plain).is_ok());
  EXPECT_EQ(packed.mlm_loss, r.eval.mlm_loss);
  EXPECT_EQ(packed.nsp_loss, r.eval.nsp_loss);
  EXPECT_EQ(packed.mlm_accuracy, r.eval.mlm_accuracy);
  EXPECT_EQ(packed.rows, r.eval.rows);
  EXPECT_EQ(plain.rows, plain.sequences);
  EXPECT_EQ(plain.sequences, packed.sequences);
  EXPECT_EQ(plain.masked, packed.masked);
  EXPECT_NEAR(plain.mlm_loss, packed.mlm_loss, 1e-5 * plain.mlm_loss);
  EXPECT_NEAR(plain.nsp_loss, packed.nsp_loss, 1e-5 * plain.nsp_loss);
  std::printf("eval mlm_loss packed %.17g unpacked %.17g\n", packed.mlm_loss, plain.mlm_loss);
}

// Held-out evaluation during training: after steps 5, 10 and the last (12), one
// {"type": "eval"} line each in the metrics file; the last equals `lansbert eval`'s
// run_eval on the final checkpoint (same samples, micro-batches and forward: bit-identical).
TEST_F(TrainerTest, HeldOutEvaluationDuringTrainingMatchesLansbertEval) {
  TrainConfig c = testing::tiny_config(*data_, scratch("eval"), 12);
  c.data.eval = {*data_ + "/shards/*.lbs"};
  c.evaluation.every_steps = 5;
  c.evaluation.max_sequences = 70;  // not a multiple of the micro-batch (16)
  std::string key;
  ASSERT_TRUE(c.validate(1, &key).is_ok()) << key;
  TrainResult r;
  ASSERT_TRUE(train(c, &r).is_ok());
  EXPECT_EQ(r.evaluations, 3);
  EXPECT_EQ(r.eval.sequences, 70);
  EXPECT_EQ(r.eval.rows, 70);  // not packed: a row each
  std::ifstream f(c.metrics_path());
  std::vector<int> eval_steps;
  int train_lines = 0;
  for (std::string l; std::getline(f, l);) {
    if (l.find("\"type\":\"eval\"") == std::string::npos) {
      ++train_lines;
      continue;
    }
    const size_t at = l.find("\"step\":");
    eval_steps.push_back(std::atoi(l.c_str() + at + 7));
  }
  EXPECT_EQ(eval_steps, (std::vector<int>{5, 10, 12}));
  EXPECT_EQ(train_lines, 3);  // logging every 5 steps and the last
  BertConfig mc;
  ASSERT_TRUE(c.resolve_model(&mc).is_ok());
  const EvalOptions eo = run_own_eval(c);
  EvalResult e;
  ASSERT_TRUE(run_eval(mc, c.checkpoint.dir + "/final", eo, &e).is_ok());
  EXPECT_EQ(e.sequences, r.eval.sequences);
  EXPECT_EQ(e.masked, r.eval.masked);
  EXPECT_EQ(e.mlm_loss, r.eval.mlm_loss);
  EXPECT_EQ(e.nsp_loss, r.eval.nsp_loss);
  EXPECT_EQ(e.mlm_accuracy, r.eval.mlm_accuracy);
  // The evaluation settings are checked up front.
  TrainConfig bad = c;
  bad.data.eval.clear();
  EXPECT_FALSE(bad.validate(1, &key).is_ok());
  EXPECT_EQ(key, "evaluation.every_steps");
  bad = c;
  bad.evaluation.max_sequences = 0;
  EXPECT_FALSE(bad.validate(1, &key).is_ok());
  EXPECT_EQ(key, "evaluation.max_sequences");
}

// A data.eval record that goes bad after the start-up check (a disk error, a file rewritten
// under the run) fails the evaluation at step 5: the run ends with the read's exit code and
// a message saying what to do, after step 5's checkpoint. Mended, the run resumes from it and
// ends where an uninterrupted run does.
TEST_F(TrainerTest, AFailedEvaluationMidRunEndsAfterTheStepsCheckpoint) {
  const std::string eval_dir = scratch("eval_fail_shards");
  fs::copy_file(*data_ + "/shards/shard-00000.lbs", eval_dir + "/e.lbs");
  TrainConfig c = testing::tiny_config(*data_, scratch("eval_fail"), 8);
  c.data.eval = {eval_dir + "/*.lbs"};
  c.evaluation.every_steps = 5;
  c.evaluation.max_sequences = 32;
  // Flips one byte of the first record in place (the same file, which the run has mapped).
  auto flip = [&] {
    std::fstream f(eval_dir + "/e.lbs", std::ios::in | std::ios::out | std::ios::binary);
    f.seekg(300);
    const char b = char(f.get() ^ 0x01);
    f.seekp(300);
    f.put(b);
  };
  TrainResult r;
  const Status st = train(c, &r, "", -1, [&](int64_t step) {
    if (step == 3) flip();
  });
  ASSERT_FALSE(st.is_ok());
  EXPECT_EQ(st.exit_code(), 4) << st.message();
  EXPECT_EQ(st.message().rfind("data.eval: " + eval_dir + "/e.lbs: record 0", 0), 0u) << st.message();
  EXPECT_NE(st.message().find("the run stopped after step 5 with its checkpoint written"), std::string::npos)
      << st.message();
  EXPECT_NE(st.message().find("mend data.eval"), std::string::npos) << st.message();
  std::string latest;
  CheckpointMeta meta;
  ASSERT_TRUE(resolve_checkpoint(c.checkpoint.dir, &latest).is_ok());
  ASSERT_TRUE(read_checkpoint_meta(latest, &meta).is_ok());
  EXPECT_EQ(meta.step, 5);
  flip();  // mended
  TrainResult resumed, straight;
  ASSERT_TRUE(train(c, &resumed, "latest").is_ok());
  TrainConfig s = c;
  s.checkpoint.dir = scratch("eval_fail_straight");
  ASSERT_TRUE(train(s, &straight).is_ok());
  EXPECT_EQ(resumed.step, 8);
  EXPECT_EQ(resumed.loss, straight.loss);
  EXPECT_EQ(resumed.eval.mlm_loss, straight.eval.mlm_loss);
  EXPECT_EQ(resumed.eval.nsp_loss, straight.eval.nsp_loss);
}

// Trains `c` (no data.eval) to its end, then runs run_eval (`lansbert eval`) of its final
// checkpoint on `data`.
Status eval_of_a_trained_run(const TrainConfig& c, const std::string& data) {
  TrainResult r;
  LB_RETURN_IF_ERROR(train(c, &r));
  BertConfig mc;
  LB_RETURN_IF_ERROR(c.resolve_model(&mc));
  EvalOptions eo = testing::tiny_eval_options(c, -1);
  eo.data = {data};
  EvalResult er;
  return run_eval(mc, c.checkpoint.dir + "/final", eo, &er);
}

// Held-out shards without a sample would log a loss of 0 over 0 sequences at every
// evaluation: refused before the first step, and by run_eval (`lansbert eval`).
TEST_F(TrainerTest, HeldOutShardsWithoutSamplesAreRefused) {
  const std::string empty = testing::write_tiny_shards(scratch("eval_empty"), /*docs=*/0);
  ASSERT_FALSE(empty.empty());
  TrainConfig c = testing::tiny_config(*data_, scratch("eval_empty_run"), 2);
  c.data.eval = {empty};
  c.evaluation.every_steps = 1;
  TrainResult r;
  Status st = train(c, &r);
  EXPECT_EQ(st.code(), StatusCode::kInvalidArgument) << st.message();
  EXPECT_EQ(st.message(), "data.eval: the shards hold no samples: nothing to evaluate");
  EXPECT_FALSE(fs::exists(c.checkpoint.dir + "/latest"));
  c.data.eval.clear();
  st = eval_of_a_trained_run(c, empty);
  EXPECT_EQ(st.code(), StatusCode::kInvalidArgument) << st.message();
  EXPECT_EQ(st.message(), "eval: the shards hold no samples: nothing to evaluate");
}

// Records whose masked slots are all empty pass every reader check but hold nothing for the
// masked-LM loss: refused rather than scored an MLM loss of 0, by the run's start-up check of
// data.eval (not days in, at the first evaluation) and by run_eval.
TEST_F(TrainerTest, HeldOutShardsWithoutMaskedTokensAreRefused) {
  const std::string unmasked = testing::write_tiny_shards(scratch("eval_unmasked"), 40, 32, 5, 7, true);
  ASSERT_FALSE(unmasked.empty());
  TrainConfig c = testing::tiny_config(*data_, scratch("eval_unmasked_run"), 2);
  c.data.eval = {unmasked};
  c.evaluation.every_steps = 1;
  TrainResult r;
  Status st = train(c, &r);
  EXPECT_EQ(st.code(), StatusCode::kInvalidArgument) << st.message();
  EXPECT_EQ(st.message().rfind("data.eval: the ", 0), 0u) << st.message();
  EXPECT_NE(st.message().find(" sequences evaluated hold no masked tokens"), std::string::npos) << st.message();
  EXPECT_FALSE(fs::exists(c.checkpoint.dir + "/latest")) << "refused before the first step";
  c.data.eval.clear();
  c.checkpoint.dir = scratch("eval_unmasked_run2");
  st = eval_of_a_trained_run(c, unmasked);
  EXPECT_EQ(st.code(), StatusCode::kInvalidArgument) << st.message();
  EXPECT_NE(st.message().find(" sequences evaluated hold no masked tokens"), std::string::npos) << st.message();
}

}  // namespace
}  // namespace lansbert
