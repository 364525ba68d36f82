// check_gemm_math_on_device: which GEMM precisions each compute capability runs as asked.
#include "lansbert/train/device_capability.h"

#include <gtest/gtest.h>

namespace lansbert {
namespace {

const std::string kV100 = "Tesla V100-SXM2-32GB (sm_70, 31 GiB)";

TEST(DeviceCapability, Bf16BeforeAmpereIsRefusedWithTheWayOut) {
  for (int cc : {70, 75}) {  // V100, T4
    std::string note = "stale";
    Status st = check_gemm_math_on_device(GemmMath::kBf16, cc, kV100, "precision.dtype", "use fp16", &note);
    EXPECT_EQ(st.code(), StatusCode::kInvalidArgument) << cc;
    for (const char* part : {"precision.dtype: bf16", "sm_80", "Tesla V100-SXM2-32GB", "has none: use fp16"})
      EXPECT_NE(st.message().find(part), std::string::npos) << part << " in: " << st.message();
    EXPECT_TRUE(note.empty());
  }
}

TEST(DeviceCapability, Tf32BeforeAmpereRunsAsFp32WithANote) {
  std::string note;
  EXPECT_TRUE(check_gemm_math_on_device(GemmMath::kTf32, 70, kV100, "--precision", "x", &note).is_ok());
  EXPECT_NE(note.find("--precision: tf32 on Tesla V100"), std::string::npos) << note;
  EXPECT_NE(note.find("plain fp32"), std::string::npos) << note;
}

TEST(DeviceCapability, WhatEachDeviceRunsPasses) {
  struct Case {
    GemmMath math;
    int cc;
  };
  // fp32 and fp16 everywhere lansbert builds (sm_70+); bf16 and tf32 from Ampere on; an
  // unknown capability (0) is not checked.
  for (Case c : {Case{GemmMath::kFp32, 70}, Case{GemmMath::kFp16, 70}, Case{GemmMath::kBf16, 80},
                 Case{GemmMath::kBf16, 86}, Case{GemmMath::kBf16, 90}, Case{GemmMath::kTf32, 80},
                 Case{GemmMath::kTf32, 90}, Case{GemmMath::kBf16, 0}, Case{GemmMath::kTf32, 0}}) {
    std::string note = "stale";
    EXPECT_TRUE(check_gemm_math_on_device(c.math, c.cc, "gpu", "precision.dtype", "x", &note).is_ok())
        << gemm_math_name(c.math) << " on " << c.cc;
    EXPECT_TRUE(note.empty()) << note;
  }
}

}  // namespace
}  // namespace lansbert
