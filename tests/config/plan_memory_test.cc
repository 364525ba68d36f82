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

}  // namespace
}  // namespace lansbert
