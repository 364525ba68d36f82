// The implementation choices under precision: (not the model, so a checkpoint resumes with
// either choice):
// - attention: native (default) | cudnn | auto; cudnn is refused on the CPU backend, like tf32;
// - gemm_cast: kernel (default) | cublas; cublas needs backend cuda and a 16-bit dtype;
// - activations: fp32 (default) | 16bit; 16bit needs a 16-bit dtype and gemm_cast kernel.
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
                                   std::pair{"native", AttentionMode::kNative}, std::pair{"flash", AttentionMode::kFlash}}) {
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
  Status st = parse({"precision.attention=fast"}, &c);
  EXPECT_FALSE(st.is_ok());
  EXPECT_NE(st.message().find("precision.attention"), std::string::npos) << st.to_string();
  EXPECT_NE(st.message().find("native, cudnn, auto or flash"), std::string::npos) << st.to_string();
  st = parse({"precision.attention=cudnn"}, &c);  // backend: cpu
  EXPECT_FALSE(st.is_ok());
  EXPECT_NE(st.message().find("CUDA option"), std::string::npos) << st.to_string();
  EXPECT_TRUE(parse({"precision.attention=auto"}, &c).is_ok());  // portable: native on the CPU
}

// flash runs on both backends (the CPU runs its twin), and its layers keep their statistics.
TEST(AttentionConfig, FlashOnTheCpuKeepsStatistics) {
  TrainConfig c;
  ASSERT_TRUE(parse({"precision.attention=flash"}, &c).is_ok());
  EXPECT_EQ(c.attention_mode(), AttentionMode::kFlash);
  EXPECT_TRUE(c.model_limits().attention_stats);
  ASSERT_TRUE(parse({"precision.attention=native"}, &c).is_ok());
  EXPECT_FALSE(c.model_limits().attention_stats);
}

TEST(GemmCastConfig, DefaultsToTheCastKernels) {
  TrainConfig c;
  ASSERT_TRUE(parse({}, &c).is_ok());
  EXPECT_EQ(c.precision.gemm_cast, "kernel");
  EXPECT_FALSE(c.cast_in_gemm());
}

TEST(GemmCastConfig, CublasOnCudaWithA16BitDtypeRoundTrips) {
  for (const char* dtype : {"bf16", "fp16"}) {
    TrainConfig c;
    Status st = parse({"backend=cuda", std::string("precision.dtype=") + dtype, "precision.gemm_cast=cublas"}, &c);
    ASSERT_TRUE(st.is_ok()) << st.to_string();
    EXPECT_TRUE(c.cast_in_gemm()) << dtype;
    TrainConfig back;
    ASSERT_TRUE(parse_train_config(config_to_json(c), "ckpt.json", {}, 1, &back).is_ok());
    EXPECT_TRUE(back.cast_in_gemm()) << dtype;
  }
}

TEST(GemmCastConfig, RefusesUnknownValuesTheCpuAndFp32) {
  const std::vector<std::pair<std::vector<std::string>, std::string>> cases = {
      {{"backend=cuda", "precision.dtype=bf16", "precision.gemm_cast=fused"}, "expected kernel or cublas"},
      {{"precision.dtype=bf16", "precision.gemm_cast=cublas"}, "CUDA option"},
      {{"backend=cuda", "precision.gemm_cast=cublas"}, "bf16 or fp16"},
  };
  for (const auto& [sets, want] : cases) {
    TrainConfig c;
    const Status st = parse(sets, &c);
    EXPECT_FALSE(st.is_ok()) << want;
    EXPECT_NE(st.message().find("precision.gemm_cast"), std::string::npos) << st.to_string();
    EXPECT_NE(st.message().find(want), std::string::npos) << st.to_string();
  }
}

TEST(FfnActivationsConfig, DefaultsToFp32And16BitRoundTrips) {
  TrainConfig c;
  ASSERT_TRUE(parse({}, &c).is_ok());
  EXPECT_EQ(c.precision.activations, "fp32");
  EXPECT_FALSE(c.model_limits().half_activations);
  for (const char* dtype : {"bf16", "fp16"})
    for (const char* backend : {"cpu", "cuda"}) {
      TrainConfig h;
      const Status st = parse({std::string("backend=") + backend, std::string("precision.dtype=") + dtype,
                               "precision.activations=16bit"}, &h);
      ASSERT_TRUE(st.is_ok()) << st.to_string();
      EXPECT_TRUE(h.model_limits().half_activations);
      TrainConfig back;
      ASSERT_TRUE(parse_train_config(config_to_json(h), "ckpt.json", {}, 1, &back).is_ok());
      EXPECT_EQ(back.precision.activations, "16bit") << dtype << " " << backend;
    }
}

TEST(FfnActivationsConfig, RefusesUnknownValuesFp32AndCublasCasts) {
  const std::vector<std::pair<std::vector<std::string>, std::string>> cases = {
      {{"precision.dtype=bf16", "precision.activations=bf16"}, "expected fp32 or 16bit"},
      {{"precision.activations=16bit"}, "needs dtype bf16 or fp16"},
      {{"backend=cuda", "precision.dtype=bf16", "precision.gemm_cast=cublas", "precision.activations=16bit"},
       "gemm_cast kernel"},
  };
  for (const auto& [sets, want] : cases) {
    TrainConfig c;
    const Status st = parse(sets, &c);
    EXPECT_FALSE(st.is_ok()) << want;
    EXPECT_NE(st.message().find("precision.activations"), std::string::npos) << st.to_string();
    EXPECT_NE(st.message().find(want), std::string::npos) << st.to_string();
  }
}

}  // namespace
}  // namespace lansbert
