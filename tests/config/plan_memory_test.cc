// The plan's activation bytes (make_plan, what `--dry-run` prints and the memory checks use)
// against the arena the CPU trainer's model actually lays out for the same config: equal for
// each precision, attention and recomputation setting the CPU backend takes, including the
// 16-bit GEMMs whose GEMM-only outputs are held as copies with no memory (OutputStorage).
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "lansbert/backend/cpu_ops.h"
#include "lansbert/config/config_loader.h"
#include "lansbert/model/bert_model.h"
#include "lansbert/train/train_config.h"

namespace lansbert {
namespace {

TEST(PlanMemory, ActivationBytesAreWhatTheCpuModelLaysOut) {
  const std::string path = std::string(LANSBERT_SOURCE_DIR) + "/configs/tiny-demo.yaml";
  const std::vector<std::vector<std::string>> settings = {
      {},
      {"precision.dtype=bf16"},
      {"precision.dtype=bf16", "precision.attention=auto"},  // the hand-written attention on the CPU
      {"precision.dtype=bf16", "precision.attention=flash"},
      {"precision.dtype=bf16", "precision.attention=flash", "precision.activations=16bit"},
      {"precision.dtype=fp16", "precision.activations=16bit", "batch.recompute=attention"},
      {"precision.dtype=bf16", "batch.recompute=layers"},
  };
  for (const auto& overrides : settings) {
    std::string what;
    for (const std::string& o : overrides) what += o + " ";
    SCOPED_TRACE(what);
    TrainConfig c;
    const Status st = load_train_config(path, overrides, 1, &c);
    ASSERT_TRUE(st.is_ok()) << st.to_string();
    TrainPlan plan;
    ASSERT_TRUE(make_plan(c, 1, &plan).is_ok());
    BertConfig mc;
    ASSERT_TRUE(c.resolve_model(&mc).is_ok());
    // As the trainer makes them (cast reuse always on in training).
    auto ops = cpu::make_ops<float>(c.gemm_math(), true, c.backend_attention_mode());
    BertModel<float> model(mc, *ops, c.model_limits());
    EXPECT_EQ(plan.activation_bytes, model.activation_bytes());
  }
}

// What a run that cannot fit is told to change: the batch settings when the activations are
// what overflows, the model when its buffers alone do (no batch setting would help then).
TEST(PlanMemory, TheRefusalNamesWhatWouldShrinkTheOverflow) {
  const std::string path = std::string(LANSBERT_SOURCE_DIR) + "/configs/tiny-demo.yaml";
  TrainConfig c;
  ASSERT_TRUE(load_train_config(path, {}, 1, &c).is_ok());
  TrainPlan plan;
  ASSERT_TRUE(make_plan(c, 1, &plan).is_ok());
  const double need = double(plan.bytes_per_rank());
  EXPECT_TRUE(check_plan_fits(c, plan, need, 1, "test memory").is_ok());
  EXPECT_TRUE(check_plan_fits(c, plan, 0, 1, "test memory").is_ok());  // unknown: no check
  // Room for the buffers but not the activations.
  const Status batch = check_plan_fits(c, plan, double(plan.flat_bytes) + 1, 1, "test memory");
  ASSERT_EQ(batch.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(batch.message().find("of test memory; reduce batch.micro_batch or data.seq_len"), std::string::npos)
      << batch.message();
  // Not even for the buffers, and two ranks share the memory.
  const Status model = check_plan_fits(c, plan, double(plan.flat_bytes) * 1.5, 2, "test memory");
  ASSERT_EQ(model.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(model.message().find("parameters, gradients and optimizer moments alone need"), std::string::npos)
      << model.message();
  EXPECT_NE(model.message().find(std::to_string(plan.parameters) + " parameters: model.vocab_size "),
            std::string::npos) << model.message();
  EXPECT_NE(model.message().find("no batch setting shrinks them: choose a smaller model"), std::string::npos)
      << model.message();
  EXPECT_EQ(model.message().find("micro_batch"), std::string::npos) << model.message();
}

}  // namespace
}  // namespace lansbert
