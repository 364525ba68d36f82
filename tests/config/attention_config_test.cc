// precision.attention: native (default) | cudnn | auto, checked with the other precision keys
// (cudnn is refused on the CPU backend, like tf32), parsed for the device backend, and kept
// out of the model: section, so a checkpoint resumes whichever attention runs.
#include <gtest/gtest.h>

#include "lansbert/config/config_loader.h"

namespace lansbert {
namespace {

const char* kTiny = R"(model:
  preset: bert-tiny
data:
  train: [a/*.lbs]
  seq_len: 32
  max_pred: 5
batch:
  global_batch: 32
  micro_batch: 16
schedule:
  total_steps: 10
)";

Status parse(const std::vector<std::string>& sets, TrainConfig* c) {
  return parse_train_config(kTiny, "tiny.yaml", sets, 1, c);
}

TEST(AttentionConfig, DefaultsToTheHandWrittenAttention) {
  TrainConfig c;
  ASSERT_TRUE(parse({}, &c).is_ok());
  EXPECT_EQ(c.precision.attention, "native");
  EXPECT_EQ(c.attention_mode(), AttentionMode::kNative);
}

TEST(AttentionConfig, ParsesTheModesForTheCudaBackend) {
  for (const auto& [name, mode] : {std::pair{"cudnn", AttentionMode::kCudnn}, std::pair{"auto", AttentionMode::kAuto},
                                   std::pair{"native", AttentionMode::kNative}}) {
    TrainConfig c;
    Status st = parse({"backend=cuda", std::string("precision.attention=") + name}, &c);
    ASSERT_TRUE(st.is_ok()) << st.to_string();
    EXPECT_EQ(c.attention_mode(), mode) << name;
    // The stored config reads back the same (what a checkpoint keeps).
    TrainConfig back;
    ASSERT_TRUE(parse_train_config(config_to_json(c), "ckpt.json", {}, 1, &back).is_ok());
    EXPECT_EQ(back.precision.attention, name);
  }
}

TEST(AttentionConfig, RefusesUnknownModesAndCudnnOnTheCpu) {
  TrainConfig c;
  Status st = parse({"precision.attention=flash"}, &c);
  EXPECT_FALSE(st.is_ok());
  EXPECT_NE(st.message().find("precision.attention"), std::string::npos) << st.to_string();
  EXPECT_NE(st.message().find("native, cudnn or auto"), std::string::npos) << st.to_string();
  st = parse({"precision.attention=cudnn"}, &c);  // backend: cpu
  EXPECT_FALSE(st.is_ok());
  EXPECT_NE(st.message().find("CUDA option"), std::string::npos) << st.to_string();
  EXPECT_TRUE(parse({"precision.attention=auto"}, &c).is_ok());  // portable: native on the CPU
}

}  // namespace
}  // namespace lansbert
