// cuda/device_info.cu on a real device: the compute capability agrees with the description,
// the binary the tests run from has code for it (check_kernel_image), and the device backend
// reports the same capability to the trainer's precision check.
#include <gtest/gtest.h>

#include <memory>
#include <string>

#include "cuda_api.h"
#include "cuda_device_backend.h"
#include "gpu_test_util.h"

namespace lansbert {
namespace {

TEST(GpuDeviceInfo, CapabilityAndKernelImageOfEveryVisibleDevice) {
  LB_REQUIRE_GPU();
  EXPECT_STRNE(cuda::built_architectures(), "unknown");
  for (int i = 0; i < cuda::device_count(); ++i) {
    const int cc = cuda::compute_capability(i);
    const std::string desc = cuda::device_description(i);
    std::printf("device %d: %s, compute capability %d, built for %s\n", i, desc.c_str(), cc,
                cuda::built_architectures());
    EXPECT_GE(cc, 70);
    EXPECT_NE(desc.find("(sm_" + std::to_string(cc) + ","), std::string::npos) << desc;
    // The tests themselves launch kernels on device 0, so it must be runnable; other devices
    // may be of another kind, and then the check must say what to rebuild with.
    const Status st = cuda::check_kernel_image(i);
    if (i == 0) {
      EXPECT_TRUE(st.is_ok()) << st.to_string();
    } else if (!st.is_ok()) {
      EXPECT_NE(st.message().find("-DLANSBERT_CUDA_ARCHITECTURES=" + std::to_string(cc)), std::string::npos);
    }
  }
  std::unique_ptr<DeviceBackend> backend;
  ASSERT_TRUE(cuda::make_device_backend(&backend).is_ok());
  ASSERT_TRUE(backend->use_device(0).is_ok());
  EXPECT_EQ(backend->compute_capability(), cuda::compute_capability(0));
}

}  // namespace
}  // namespace lansbert
