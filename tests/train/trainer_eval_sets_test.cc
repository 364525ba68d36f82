// Named held-out sets (evaluation.names): each data.eval entry evaluated on its own and
// reported under its name, beside the sums of all of them. A set's numbers are those of
// `lansbert eval` of that entry alone (the same micro-batches), the sums are the sets' sums,
// and a set that cannot be scored is refused by its entry before the first step.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

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
using EvalSetsTest = testing::TinyShardsTest;

// A run on the fixture's shards whose held-out data is two entries: the fixture's shards
// (set "a") and shards of other documents (set "b"), each read up to `max_sequences`.
TrainConfig two_set_config(const std::string& data, const std::string& other, const std::string& ckpt,
                           int64_t max_sequences) {
  TrainConfig c = testing::tiny_config(data, ckpt, 5);
  c.data.eval = {data + "/shards/*.lbs", other};
  c.evaluation.names = {"a", "b"};
  c.evaluation.every_steps = 5;
  c.evaluation.max_sequences = max_sequences;
  return c;
}

EvalResult result_of(const nlohmann::json& j) {
  EvalResult r;
  r.sequences = j.at("sequences").get<int64_t>();
  r.rows = j.at("rows").get<int64_t>();
  r.mlm_loss = j.at("mlm_loss").get<double>();
  r.nsp_loss = j.at("nsp_loss").get<double>();
  r.mlm_accuracy = j.at("mlm_accuracy").get<double>();
  r.nsp_accuracy = j.at("nsp_accuracy").get<double>();
  return r;
}

void expect_same(const EvalResult& want, const EvalResult& got, const std::string& what) {
  EXPECT_EQ(want.sequences, got.sequences) << what;
  EXPECT_EQ(want.mlm_loss, got.mlm_loss) << what;
  EXPECT_EQ(want.nsp_loss, got.nsp_loss) << what;
  EXPECT_EQ(want.mlm_accuracy, got.mlm_accuracy) << what;
  EXPECT_EQ(want.nsp_accuracy, got.nsp_accuracy) << what;
}

// Each set's first 40 samples (not a multiple of the micro-batch of 16, and fewer than either
// set holds), reported apart in the result and the metrics line; each equals run_eval of its
// entry alone, and the line's totals are the two sets' sums (masked-token weighted means).
TEST_F(EvalSetsTest, EachNamedSetIsItsEntryEvaluatedAlone) {
  const std::string other = testing::write_tiny_shards(scratch("other"), 200, 32, 5, /*seed=*/11);
  ASSERT_FALSE(other.empty());
  TrainConfig c = two_set_config(*data_, other, scratch("sets"), 40);
  std::string key;
  ASSERT_TRUE(c.validate(1, &key).is_ok()) << key;
  TrainResult r;
  ASSERT_TRUE(train(c, &r).is_ok());
  ASSERT_EQ(r.evaluations, 1);
  ASSERT_EQ(r.eval_sets.size(), 2u);
  EXPECT_EQ(r.eval_sets[0].sequences, 40);
  EXPECT_EQ(r.eval_sets[1].sequences, 40);
  EXPECT_EQ(r.eval.sequences, 80);
  EXPECT_EQ(r.eval.masked, r.eval_sets[0].masked + r.eval_sets[1].masked);
  const double mlm = (r.eval_sets[0].mlm_loss * double(r.eval_sets[0].masked) +
                      r.eval_sets[1].mlm_loss * double(r.eval_sets[1].masked)) /
                     double(r.eval.masked);
  EXPECT_NEAR(r.eval.mlm_loss, mlm, 1e-12 * mlm);
  EXPECT_NEAR(r.eval.nsp_loss, (r.eval_sets[0].nsp_loss + r.eval_sets[1].nsp_loss) / 2, 1e-12);
  // Other documents score otherwise: the two sets are not one set read twice.
  EXPECT_NE(r.eval_sets[0].mlm_loss, r.eval_sets[1].mlm_loss);

  // The metrics line: the totals as before, and each set under its name.
  std::ifstream f(c.metrics_path());
  int eval_lines = 0;
  for (std::string l; std::getline(f, l);) {
    const nlohmann::json j = nlohmann::json::parse(l);
    if (j.value("type", "") != "eval") continue;
    ++eval_lines;
    expect_same(r.eval, result_of(j), "the line's totals");
    ASSERT_TRUE(j.contains("sets")) << l;
    ASSERT_EQ(j["sets"].size(), 2u) << l;
    expect_same(r.eval_sets[0], result_of(j["sets"]["a"]), "set a in the metrics line");
    expect_same(r.eval_sets[1], result_of(j["sets"]["b"]), "set b in the metrics line");
  }
  EXPECT_EQ(eval_lines, 1);

  // `lansbert eval` of the final checkpoint: with the names, the same sets and sums bit for
  // bit; each entry alone without names, its set's numbers.
  BertConfig mc;
  ASSERT_TRUE(c.resolve_model(&mc).is_ok());
  EvalOptions eo = testing::tiny_eval_options(c, 40);
  eo.data = c.data.eval;
  eo.names = c.evaluation.names;
  EvalResult all;
  std::vector<EvalResult> sets;
  ASSERT_TRUE(run_eval(mc, c.checkpoint.dir + "/final", eo, &all, &sets).is_ok());
  expect_same(r.eval, all, "run_eval's sums");
  ASSERT_EQ(sets.size(), 2u);
  for (size_t i = 0; i < 2; ++i) {
    expect_same(r.eval_sets[i], sets[i], "run_eval's set " + std::to_string(i));
    EvalOptions alone = eo;
    alone.data = {c.data.eval[i]};
    alone.names.clear();
    EvalResult one;
    std::vector<EvalResult> none;
    ASSERT_TRUE(run_eval(mc, c.checkpoint.dir + "/final", alone, &one, &none).is_ok());
    EXPECT_TRUE(none.empty());
    expect_same(r.eval_sets[i], one, "entry " + std::to_string(i) + " alone");
  }
  // Names for another number of entries.
  eo.names = {"a"};
  const Status st = run_eval(mc, c.checkpoint.dir + "/final", eo, &all, &sets);
  EXPECT_EQ(st.message(), "eval: 1 names for 2 --data entries (one each)");
}

// Without max_sequences every sample of each set: the sums are the whole of data.eval, as a
// run without names evaluates it (to rounding: other micro-batches).
TEST_F(EvalSetsTest, AllSamplesOfEverySetSumToTheUnnamedEvaluation) {
  const std::string other = testing::write_tiny_shards(scratch("other"), 60, 32, 5, /*seed=*/13);
  ASSERT_FALSE(other.empty());
  TrainConfig named = two_set_config(*data_, other, scratch("named"), -1);
  named.logging.every_steps = 1;  // the last window is the last step, resumed or not
  TrainConfig plain = named;
  plain.evaluation.names.clear();
  plain.checkpoint.dir = scratch("plain");
  TrainResult a, b;
  ASSERT_TRUE(train(named, &a).is_ok());
  ASSERT_TRUE(train(plain, &b).is_ok());
  EXPECT_TRUE(b.eval_sets.empty());
  EXPECT_EQ(a.eval.sequences, b.eval.sequences);
  EXPECT_EQ(a.eval.masked, b.eval.masked);
  EXPECT_EQ(a.eval.sequences, a.eval_sets[0].sequences + a.eval_sets[1].sequences);
  EXPECT_NEAR(a.eval.mlm_loss, b.eval.mlm_loss, 1e-5 * b.eval.mlm_loss);
  EXPECT_NEAR(a.eval.nsp_loss, b.eval.nsp_loss, 1e-5 * b.eval.nsp_loss);
  EXPECT_EQ(a.loss, b.loss);  // the names change the evaluation only
  // A run begun without names and resumed with them evaluates the named sets as one with them
  // from the start does, bit for bit.
  TrainConfig later = plain;
  later.checkpoint.dir = scratch("later");
  TrainResult c;
  ASSERT_TRUE(train(later, &c, "", 2).is_ok());
  later.evaluation.names = named.evaluation.names;
  ASSERT_TRUE(train(later, &c, "latest").is_ok());
  ASSERT_EQ(c.eval_sets.size(), 2u);
  for (size_t i = 0; i < 2; ++i) expect_same(a.eval_sets[i], c.eval_sets[i], "resumed with names, set " + std::to_string(i));
  EXPECT_EQ(a.loss, c.loss);
}

// A set that cannot be scored is refused before the first step, by its entry and name: one
// without samples, one whose masked slots are all empty; a file in two entries is refused as
// data.train's sources are.
TEST_F(EvalSetsTest, ASetThatCannotBeScoredIsRefusedByItsEntry) {
  const std::string empty = testing::write_tiny_shards(scratch("empty"), /*docs=*/0);
  const std::string unmasked = testing::write_tiny_shards(scratch("unmasked"), 40, 32, 5, 7, true);
  ASSERT_FALSE(empty.empty());
  ASSERT_FALSE(unmasked.empty());
  TrainConfig c = two_set_config(*data_, empty, scratch("refused_empty"), 40);
  TrainResult r;
  Status st = train(c, &r);
  EXPECT_EQ(st.code(), StatusCode::kInvalidArgument) << st.message();
  EXPECT_EQ(st.message(), "data.eval[1] (b): the files of " + empty + " hold no samples: nothing to evaluate");
  EXPECT_FALSE(fs::exists(c.checkpoint.dir + "/latest"));
  c = two_set_config(*data_, unmasked, scratch("refused_unmasked"), 40);
  st = train(c, &r);
  EXPECT_EQ(st.code(), StatusCode::kInvalidArgument) << st.message();
  EXPECT_EQ(st.message().rfind("data.eval[1] (b): the 40 sequences evaluated hold no masked tokens", 0), 0u)
      << st.message();
  EXPECT_FALSE(fs::exists(c.checkpoint.dir + "/latest"));
  c = two_set_config(*data_, *data_ + "/shards/shard-00000.lbs", scratch("refused_twice"), 40);
  st = train(c, &r);
  EXPECT_EQ(st.code(), StatusCode::kInvalidArgument) << st.message();
  EXPECT_NE(st.message().find("data.eval[0] (" + *data_ + "/shards/*.lbs) and in data.eval[1]"), std::string::npos)
      << st.message();
}

}  // namespace
}  // namespace lansbert
