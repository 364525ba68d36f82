// The YAML schema: a good file resolves, --set overrides are typed, every shipped config
// in configs/ passes --dry-run semantics (load + plan), and each kind of bad input gets its
// own message naming the file, line and key path.
#include <gtest/gtest.h>

#include <filesystem>

#include "lansbert/config/config_loader.h"

namespace lansbert {
namespace {

const char* kGood = R"(model:
  preset: bert-tiny
  vocab_size: 64
data:
  train: [a/*.lbs]
  seq_len: 32
  max_pred: 5
batch:
  global_batch: 32
  micro_batch: 16
optimizer:
  name: lans
  lr: 0.01
schedule:
  total_steps: 10
checkpoint:
  dir: ckpt
)";

TEST(ConfigLoader, GoodFileAndOverrides) {
  TrainConfig c;
  Status st = parse_train_config(kGood, "good.yaml", {"optimizer.lr=0.02", "data.train=[x, y]", "seed=7"}, 1, &c);
  ASSERT_TRUE(st.is_ok()) << st.to_string();
  EXPECT_EQ(c.schedule.peak_lr, 0.02);
  EXPECT_EQ(c.data.train, (std::vector<std::string>{"x", "y"}));
  EXPECT_EQ(c.seed, 7u);
  EXPECT_FALSE(c.distributed.shard_optimizer);
  EXPECT_EQ(c.distributed.reduction_order, "fast");
  EXPECT_EQ(c.distributed.grad_reduce_dtype, "fp32");
  EXPECT_TRUE(c.distributed.overlap_reduction);
  EXPECT_EQ(c.model_limits().recompute, Recompute::kNone);
  for (Recompute mode : {Recompute::kAttention, Recompute::kLayers}) {
    TrainConfig r;
    st = parse_train_config(kGood, "good.yaml", {std::string("batch.recompute=") + recompute_name(mode)}, 1, &r);
    ASSERT_TRUE(st.is_ok()) << st.to_string();
    EXPECT_EQ(r.model_limits().recompute, mode);
    EXPECT_EQ(r.model_limits().max_batch, 16);
    TrainConfig r_back;  // stored in checkpoints and read back
    ASSERT_TRUE(parse_train_config(config_to_json(r), "trainer.json", {}, 1, &r_back).is_ok());
    EXPECT_EQ(r_back.batch.recompute, mode);
  }
  TrainConfig d;
  st = parse_train_config(kGood, "good.yaml",
                          {"distributed.shard_optimizer=true", "distributed.reduction_order=fixed",
                           "distributed.bucket_mb=4.5", "distributed.grad_reduce_dtype=bf16",
                           "distributed.overlap_reduction=false"}, 2, &d);
  ASSERT_TRUE(st.is_ok()) << st.to_string();
  EXPECT_TRUE(d.distributed.shard_optimizer);
  EXPECT_EQ(d.distributed.reduction_order, "fixed");
  EXPECT_EQ(d.distributed.bucket_mb, 4.5);
  EXPECT_EQ(d.distributed.grad_reduce_dtype, "bf16");
  EXPECT_FALSE(d.distributed.overlap_reduction);
  TrainConfig e;  // fp16 on the wire behind fp16's dynamic loss scale
  st = parse_train_config(kGood, "good.yaml", {"precision.dtype=fp16", "distributed.grad_reduce_dtype=fp16"}, 2, &e);
  ASSERT_TRUE(st.is_ok()) << st.to_string();
  EXPECT_EQ(e.distributed.grad_reduce_dtype, "fp16");
  BertConfig mc;
  ASSERT_TRUE(c.resolve_model(&mc).is_ok());
  EXPECT_EQ(mc.hidden, 128);
  EXPECT_EQ(mc.vocab_size, 64);
  // The resolved config read back (what a checkpoint stores) is the same config.
  TrainConfig back;
  st = parse_train_config(config_to_json(c), "trainer.json", {}, 1, &back);
  ASSERT_TRUE(st.is_ok()) << st.to_string();
  EXPECT_EQ(config_to_json(back), config_to_json(c));
  EXPECT_EQ(mc.hidden_act, kern::GeluForm::kErf);  // the presets' GELU
  // Ours, and Hugging Face's names of the tanh form.
  for (const char* name : {"gelu_tanh", "gelu_new", "gelu_pytorch_tanh", "gelu_fast"}) {
    TrainConfig t;
    st = parse_train_config(kGood, "good.yaml", {std::string("model.hidden_act=") + name}, 1, &t);
    ASSERT_TRUE(st.is_ok()) << st.to_string();
    ASSERT_TRUE(t.resolve_model(&mc).is_ok());
    EXPECT_EQ(mc.hidden_act, kern::GeluForm::kTanh);
    TrainConfig t_back;
    ASSERT_TRUE(parse_train_config(config_to_json(t), "trainer.json", {}, 1, &t_back).is_ok());
    EXPECT_NE(config_to_json(t_back).find("\"hidden_act\":\"gelu_tanh\""), std::string::npos) << config_to_json(t_back);
  }
}

TEST(ConfigLoader, EveryShippedConfigPlans) {
  const auto dir = std::filesystem::path(LANSBERT_SOURCE_DIR) / "configs";
  int n = 0;
  for (const auto& e : std::filesystem::directory_iterator(dir)) {
    if (e.path().extension() != ".yaml") continue;
    TrainConfig c;
    Status st = load_train_config(e.path().string(), {}, 1, &c);
    ASSERT_TRUE(st.is_ok()) << st.to_string();
    TrainPlan plan;
    ASSERT_TRUE(make_plan(c, 1, &plan).is_ok());
    EXPECT_GT(plan.parameters, 0u);
    ++n;
  }
  EXPECT_GE(n, 7);
}

// With cuDNN's attention and attention dropout the plan counts the one bf16 keep mask
// [micro_batch, heads, S, S] the fused path stages for all layers; without dropout, natively
// or on the CPU (where `auto` is the hand-written attention) it does not.
TEST(ConfigLoader, PlanCountsTheFusedAttentionsDropoutMask) {
  const std::string path = std::string(LANSBERT_SOURCE_DIR) + "/configs/bert-large-phase2-33k.yaml";
  auto half_bytes = [&](std::vector<std::string> overrides) {
    TrainConfig c;
    const Status st = load_train_config(path, overrides, 1, &c);
    EXPECT_TRUE(st.is_ok()) << st.to_string();
    TrainPlan plan;
    EXPECT_TRUE(make_plan(c, 1, &plan).is_ok());
    return plan.half_bytes;
  };
  const size_t native = half_bytes({"precision.attention=native"});
  const size_t fused = half_bytes({"precision.attention=cudnn"});
  const size_t fused_no_dropout = half_bytes({"precision.attention=cudnn", "model.attention_dropout=0"});
  const size_t mask = size_t(11) * 16 * 512 * 512 * 2;  // micro_batch 11, bert-large's 16 heads
  EXPECT_EQ(fused, fused_no_dropout + mask);
  EXPECT_LT(fused_no_dropout, native);  // no kept q/k/v or probabilities
  EXPECT_EQ(half_bytes({"precision.attention=auto", "backend=cpu", "precision.dtype=fp32",
                        "distributed.grad_reduce_dtype=fp32"}),
            half_bytes({"precision.attention=native", "backend=cpu", "precision.dtype=fp32",
                        "distributed.grad_reduce_dtype=fp32"}));
}

// The LANS recipe's configs run on the paper's cluster (192 p3dn.24xlarge: 1,536 ranks), on
// one such node and on one GPU: each global batch is a whole number of micro-batches there.
TEST(ConfigLoader, LansConfigsFitThePapersClusterAndOneNode) {
  const auto dir = std::filesystem::path(LANSBERT_SOURCE_DIR) / "configs";
  for (const char* name : {"bert-large-phase1-96k.yaml", "bert-large-phase2-33k.yaml"})
    for (int world : {1536, 8, 1}) {
      TrainConfig c;
      const Status st = load_train_config((dir / name).string(), {}, world, &c);
      EXPECT_TRUE(st.is_ok()) << name << " on " << world << " ranks: " << st.to_string();
    }
}

struct Bad {
  std::string edit;                    // replaces `from` in kGood
  std::string from;
  std::vector<std::string> overrides;
  std::vector<std::string> expect;     // substrings of the message
};

// One document, marked or not: a leading `---`, a trailing `...` or an empty last `---`.
TEST(ConfigLoader, DocumentMarkersAroundTheOneDocument) {
  for (const std::string& text : {"---\n" + std::string(kGood), std::string(kGood) + "...\n",
                                  std::string(kGood) + "---\n", "%YAML 1.2\n---\n" + std::string(kGood)}) {
    TrainConfig c;
    const Status st = parse_train_config(text, "good.yaml", {}, 1, &c);
    EXPECT_TRUE(st.is_ok()) << st.to_string() << " for:\n" << text;
    EXPECT_EQ(c.schedule.total_steps, 10);
  }
}

// logging.tensorboard_dir: none by default and for "-", "auto" under checkpoint.dir (which a
// --set may change after the file set "auto"), else the folder given.
TEST(ConfigLoader, TensorboardDirAutoFollowsTheCheckpointDir) {
  const std::vector<std::pair<std::vector<std::string>, std::string>> cases = {
      {{}, ""},
      {{"logging.tensorboard_dir=-"}, ""},
      {{"logging.tensorboard_dir=auto"}, "ckpt/tensorboard"},
      {{"logging.tensorboard_dir=auto", "checkpoint.dir=/tmp/other"}, "/tmp/other/tensorboard"},
      {{"logging.tensorboard_dir=tb/run1"}, "tb/run1"}};
  for (const auto& [sets, want] : cases) {
    TrainConfig c;
    const Status st = parse_train_config(kGood, "good.yaml", sets, 1, &c);
    ASSERT_TRUE(st.is_ok()) << st.to_string();
    EXPECT_EQ(c.tensorboard_path(), want) << (sets.empty() ? "(no --set)" : sets.front());
  }
}

TEST(ConfigLoader, WeightsAreOnePerTrainEntry) {
  TrainConfig c;
  ASSERT_TRUE(parse_train_config(kGood, "good.yaml", {"data.train=[a, b]", "data.weights=[0.7, 0.3]"}, 1, &c).is_ok());
  EXPECT_EQ(c.data.weights, (std::vector<double>{0.7, 0.3}));
  ASSERT_TRUE(parse_train_config(kGood, "good.yaml", {"data.weights=2"}, 1, &c).is_ok());
  EXPECT_EQ(c.data.weights, (std::vector<double>{2}));
  ASSERT_TRUE(parse_train_config(kGood, "good.yaml", {}, 1, &c).is_ok());
  EXPECT_TRUE(c.data.weights.empty());
}

// evaluation.names: one per data.eval entry, in the config json only when given (so the
// checkpoints of runs without them compare as before).
TEST(ConfigLoader, EvaluationNamesAreOnePerEvalEntry) {
  TrainConfig c;
  const Status st =
      parse_train_config(kGood, "good.yaml", {"data.eval=[h/wiki, h/books]", "evaluation.names=[wiki, books-1.2]"}, 1, &c);
  ASSERT_TRUE(st.is_ok()) << st.message();
  EXPECT_EQ(c.evaluation.names, (std::vector<std::string>{"wiki", "books-1.2"}));
  EXPECT_NE(config_to_json(c).find("\"names\":[\"wiki\",\"books-1.2\"]"), std::string::npos) << config_to_json(c);
  ASSERT_TRUE(parse_train_config(kGood, "good.yaml", {"data.eval=[h/wiki]"}, 1, &c).is_ok());
  EXPECT_TRUE(c.evaluation.names.empty());
  EXPECT_EQ(config_to_json(c).find("\"names\""), std::string::npos) << config_to_json(c);
}

// logging.noise_scale: a switch, in the config json only when on; one micro-batch per update
// (32 = 16 x 2 ranks) leaves nothing to compare and is refused naming the key.
TEST(ConfigLoader, NoiseScaleNeedsTwoMicroBatches) {
  TrainConfig c;
  ASSERT_TRUE(parse_train_config(kGood, "good.yaml", {"logging.noise_scale=true"}, 1, &c).is_ok());
  EXPECT_TRUE(c.logging.noise_scale);
  EXPECT_NE(config_to_json(c).find("\"noise_scale\":true,\"noise_scale_updates\":100"), std::string::npos)
      << config_to_json(c);
  ASSERT_TRUE(parse_train_config(kGood, "good.yaml", {}, 1, &c).is_ok());
  EXPECT_EQ(config_to_json(c).find("noise_scale"), std::string::npos);
  const Status st = parse_train_config(kGood, "good.yaml", {"logging.noise_scale=true"}, 2, &c);
  EXPECT_NE(st.message().find("--set logging.noise_scale: logging.noise_scale: compares a micro-batch's gradient"),
            std::string::npos)
      << st.message();
}

TEST(ConfigLoader, CosineScheduleWithAFloor) {
  TrainConfig c;
  const Status st = parse_train_config(kGood, "good.yaml", {"schedule.kind=cosine", "schedule.min_ratio=0.1"}, 1, &c);
  ASSERT_TRUE(st.is_ok()) << st.message();
  EXPECT_EQ(c.schedule.kind, ScheduleKind::kCosine);
  EXPECT_EQ(c.schedule.min_ratio, 0.1);
  EXPECT_NE(config_to_json(c).find("\"min_ratio\":0.1"), std::string::npos) << config_to_json(c);
  ASSERT_TRUE(parse_train_config(kGood, "good.yaml", {"schedule.kind=cosine"}, 1, &c).is_ok());
  EXPECT_NE(config_to_json(c).find("\"min_ratio\":0.0"), std::string::npos) << config_to_json(c);
  // Other kinds leave it out (their checkpoints keep the json of builds without it).
  ASSERT_TRUE(parse_train_config(kGood, "good.yaml", {}, 1, &c).is_ok());
  EXPECT_EQ(config_to_json(c).find("min_ratio"), std::string::npos);
}

TEST(ConfigLoader, BadConfigsNameFileLineAndKey) {
  const std::vector<Bad> cases = {
      {"  lrr: 0.01\n", "  lr: 0.01\n", {}, {"bad.yaml:13:", "optimizer.lrr: unknown key (did you mean optimizer.lr?)"}},
      {"  lr: fast\n", "  lr: 0.01\n", {}, {"bad.yaml:13:", "optimizer.lr: expected a number, got 'fast'"}},
      {"  seq_len: [1]\n", "  seq_len: 32\n", {}, {"bad.yaml:6:", "data.seq_len: expected an integer"}},
      {"  global_batch: 33\n", "  global_batch: 32\n", {}, {"bad.yaml:9:", "batch.global_batch", "not a multiple"}},
      {"  name: adam\n", "  name: lans\n", {}, {"bad.yaml:12:", "optimizer.name", "adam"}},
      {"batch: 5\n", "batch:\n  global_batch: 32\n  micro_batch: 16\n", {}, {"bad.yaml:8:", "batch: expected a mapping"}},
      {"  preset: bert-huge\n", "  preset: bert-tiny\n", {}, {"bad.yaml:2:", "model.preset", "bert-huge"}},
      {"  total_steps: 0\n", "  total_steps: 10\n", {}, {"bad.yaml:15:", "schedule.total_steps", "positive"}},
      {"  max_pred: 40\n", "  max_pred: 5\n", {}, {"bad.yaml:7:", "data.max_pred"}},
      {"  seq_len: 1024\n", "  seq_len: 32\n", {}, {"bad.yaml:6:", "data.seq_len", "max_positions"}},
      {"", "", {"precision.dtype=fp8"}, {"--set precision.dtype", "expected fp32, bf16 or fp16, got 'fp8'"}},
      {"", "", {"optimizer.lrr=1"}, {"optimizer.lrr: unknown key (did you mean optimizer.lr?)"}},
      {"", "", {"precision.dtpye=fp16"}, {"precision.dtpye: unknown key (did you mean precision.dtype?)"}},
      // No near name: the section's keys, or at the top the sections and top-level keys.
      {"", "", {"optimizer.learning_rate=1"}, {"optimizer.learning_rate: unknown key (optimizer has name, lr, "}},
      {"", "", {"epochs=3"}, {"epochs: unknown key (the top level has ", "checkpoint", "seed", "backend"}},
      // A check across keys names the --set over the file's line of the other key.
      {"", "", {"batch.micro_batch=12"}, {"--set batch.micro_batch: batch.global_batch: 32 is not a multiple"}},
      {"precisoin:\n", "checkpoint:\n", {}, {"bad.yaml:16:", "precisoin: unknown key (did you mean precision?)"}},
      {"", "", {"optimizer.beta1=1.5"}, {"--set optimizer.beta1", "optimizer.beta1"}},
      {"  dir: ckpt\n  keep_last: 0\n", "  dir: ckpt\n", {}, {"bad.yaml:18:", "checkpoint.keep_last"}},
      {"  micro_batch: -4\n", "  micro_batch: 16\n", {}, {"bad.yaml:10:", "batch.micro_batch", "positive"}},
      {"  micro_batch: 16\n  recompute: true\n", "  micro_batch: 16\n", {},
       {"bad.yaml:11:", "batch.recompute: expected none, attention or layers, got 'true'"}},
      {"  kind: cosine_restarts\n  total_steps: 10\n", "  total_steps: 10\n", {}, {"bad.yaml:15:", "schedule.kind", "cosine_restarts"}},
      {"  min_ratio: 0.1\n  total_steps: 10\n", "  total_steps: 10\n", {},
       {"bad.yaml:15:", "schedule.min_ratio: only kind cosine decays to a floor"}},
      {"phase:\n  phase_start: sometimes\n", "checkpoint:\n", {}, {"bad.yaml:17:", "phase.phase_start", "sometimes"}},
      {"  hidden: 100\n  heads: 3\n", "  vocab_size: 64\n", {}, {"bad.yaml:3:", "model.hidden", "heads"}},
      // A check across keys points at the one the user gave (the preset gave model.hidden).
      {"", "", {"model.heads=3"}, {"--set model.heads: model.hidden (128) must be divisible by model.heads (3)"}},
      {"  vocab_size: 64\n  heads: 3\n", "  vocab_size: 64\n", {}, {"bad.yaml:4:", "model.hidden (128) must be"}},
      {"  train: [a/*.lbs\n", "  train: [a/*.lbs]\n", {}, {"bad.yaml:", "YAML syntax error"}},
      {"", "", {"seed=-3"}, {"--set seed=-3", "seed", "out of range"}},
      {"", "", {"data.eval="}, {"--set data.eval: data.eval: an empty pattern (no held-out set: data.eval=[])"}},
      {"  train: [a/*.lbs, '']\n", "  train: [a/*.lbs]\n", {}, {"bad.yaml:5:", "data.train: an empty pattern"}},
      {"  train: [a/*.lbs]\n  weights: [1, 2]\n", "  train: [a/*.lbs]\n", {},
       {"bad.yaml:6:", "data.weights: 2 weights for the 1 entries of data.train (one each)"}},
      {"  train: [a, b]\n  weights: [1, -2]\n", "  train: [a/*.lbs]\n", {},
       {"bad.yaml:6:", "data.weights[1]: -2 is not a positive number"}},
      {"  train: [a, b]\n  weights: [1, heavy]\n", "  train: [a/*.lbs]\n", {},
       {"bad.yaml:6:", "data.weights: expected a number, got 'heavy'"}},
      {"  train: [a, b]\n  weights: {a: 1}\n", "  train: [a/*.lbs]\n", {},
       {"bad.yaml:6:", "data.weights: expected a list of numbers, got a mapping"}},
      {"", "", {"data.train=[a, b]", "data.weights=[1, 1e-6]"},
       {"--set data.weights", "data.weights[1]: 1e-06 is 1e-06 of the weights' sum, below the blend's resolution"}},
      {"  dir: ckpt\nevaluation:\n  names: [wiki]\n", "  dir: ckpt\n", {},
       {"bad.yaml:19:", "evaluation.names: 1 name for the 0 entries of data.eval (one each)"}},
      {"  dir: ckpt\nevaluation:\n  names: [wiki]\n", "  dir: ckpt\n", {"data.eval=[h1, h2]"},
       {"--set data.eval: evaluation.names: 1 name for the 2 entries of data.eval (one each)"}},
      {"", "", {"data.eval=[h1, h2]", "evaluation.names=[wiki, wiki]"},
       {"--set evaluation.names", "evaluation.names: 'wiki' names entries 0 and 1: each set needs its own name"}},
      {"", "", {"logging.noise_scale_updates=0"}, {"--set logging.noise_scale_updates", "must be >= 1"}},
      {"", "", {"data.eval=[h1]", "evaluation.names=[eval/x]"},
       {"evaluation.names: 'eval/x' (entry 0): a name is 1 to 64 letters, digits"}},
      {"  vocab_size: 64\n  hidden_act: relu\n", "  vocab_size: 64\n", {},
       {"bad.yaml:4:", "model.hidden_act", "'relu'", "gelu_tanh"}},
      {"", "", {"distributed.reduction_order=ring"}, {"--set distributed.reduction_order", "fast or fixed", "ring"}},
      {"", "", {"distributed.bucket_mb=0"}, {"--set distributed.bucket_mb", "(0, 4096]"}},
      {"", "", {"distributed.grad_reduce_dtype=int8"}, {"distributed.grad_reduce_dtype", "fp32, bf16 or fp16", "int8"}},
      {"", "", {"distributed.grad_reduce_dtype=fp16"}, {"distributed.grad_reduce_dtype", "needs a loss scale"}},
      {"", "", {"distributed.shard_optimizer=maybe"}, {"distributed.shard_optimizer: expected true or false"}},
      {"checkpoint:\n  dir: ckpt\ndistributed:\n  bucket_mb: -1\n", "checkpoint:\n  dir: ckpt\n", {},
       {"bad.yaml:19:", "distributed.bucket_mb"}},
      {"", "", {"precision.max_consecutive_skips=0"}, {"precision.max_consecutive_skips must be >= 1"}},
      {"", "", {"optimizer=5"}, {"--set optimizer=5: optimizer is a section: set one of its keys, optimizer.KEY=VALUE"}},
      {"  preset: ~\n", "  preset: bert-tiny\n", {}, {"bad.yaml:2:", "model.preset", "got nothing (null)"}},
      // What follows a `---` or `...` line is another document, which YAML::Load would drop.
      {"  dir: ckpt\n---\nbatch: {global_batch: 64}\n", "  dir: ckpt\n", {},
       {"bad.yaml:19:1: a second YAML document (after a '---' or '...' line)"}},
      {"  dir: ckpt\n...\nbogus: [\n", "  dir: ckpt\n", {}, {"bad.yaml:", "YAML syntax error"}},
      {"  dir: ckpt\n---\n---\nbatch: {global_batch: 64}\n", "  dir: ckpt\n", {},
       {"bad.yaml:20:1: a second YAML document"}},
  };
  for (const Bad& b : cases) {
    std::string text = kGood;
    if (!b.from.empty()) {
      const size_t at = text.find(b.from);
      ASSERT_NE(at, std::string::npos) << b.from;
      text.replace(at, b.from.size(), b.edit);
    }
    TrainConfig c;
    Status st = parse_train_config(text, "bad.yaml", b.overrides, 1, &c);
    ASSERT_FALSE(st.is_ok()) << b.edit << (b.overrides.empty() ? "" : b.overrides[0]);
    EXPECT_EQ(st.exit_code(), 2) << st.to_string();
    for (const std::string& s : b.expect)
      EXPECT_NE(st.message().find(s), std::string::npos) << "missing '" << s << "' in: " << st.message();
  }
}

}  // namespace
}  // namespace lansbert
