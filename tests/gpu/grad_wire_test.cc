// The 16-bit gradient wire on the device: the conversion kernels against their host twins
// (the same grad_wire.h bodies, so bit for bit, NaN and infinity included), and the NCCL
// communicator's 16-bit collectives as a one-rank job: the conversion kernels, the
// ncclBfloat16/ncclFloat16 collectives (in-place reduce-scatter and reduce included) and
// their stream order run; with one rank the result is each value rounded to 16 bits and
// back (and the fp32 reduce is the identity). Two GPUs are needed to check the sums.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>

#include "grad_wire.h"
#include "gpu_test_util.h"
#include "lansbert/kernels/grad_wire.h"

#if defined(LANSBERT_HAVE_NCCL)
#include "nccl_communicator.h"
#endif

namespace lansbert {
namespace {

TEST(GpuGradWire, ConversionsMatchTheHostBodies) {
  LB_REQUIRE_GPU();
  std::vector<float> x = testing::random_vector(70001, 17, 3e4f);  // some beyond fp16's range
  x[0] = NAN;
  x[1] = INFINITY;
  x[2] = 1e-9f;  // below fp16's subnormals after scaling
  for (kern::HalfFormat f : {kern::HalfFormat::kBf16, kern::HalfFormat::kFp16}) {
    for (float scale : {1.f, 0.25f, 1.f / 3}) {
      auto dx = testing::to_device(x);
      Buffer<uint16_t> dw(x.size(), cuda::device_allocator());
      cuda::grads_to_wire(dx.data(), dw.data(), x.size(), scale, f, nullptr);
      const std::vector<uint16_t> w = testing::to_host(dw);
      size_t wrong = 0;
      for (size_t i = 0; i < x.size(); ++i) wrong += w[i] != kern::grad_to_wire(x[i], scale, f);
      EXPECT_EQ(wrong, 0u) << "scale " << scale;
      Buffer<float> back(x.size(), cuda::device_allocator());
      cuda::grads_from_wire(dw.data(), back.data(), x.size(), f, nullptr);
      const std::vector<float> y = testing::to_host(back);
      wrong = 0;
      for (size_t i = 0; i < x.size(); ++i) {
        const float want = kern::half_to_float(w[i], f);
        wrong += std::memcmp(&y[i], &want, sizeof want) != 0;
      }
      EXPECT_EQ(wrong, 0u) << "widening, scale " << scale;
    }
  }
}

#if defined(LANSBERT_HAVE_NCCL)
TEST(GpuGradWire, OneRankNcclRoundsThroughTheWire) {
  LB_REQUIRE_GPU();
  std::unique_ptr<Communicator> boot = make_single_process_communicator();
  std::unique_ptr<Communicator> nccl = cuda::make_nccl_communicator(*boot);
  const std::vector<float> x = testing::random_vector(4099, 5);
  for (kern::HalfFormat f : {kern::HalfFormat::kBf16, kern::HalfFormat::kFp16}) {
    std::vector<float> want(x.size());
    for (size_t i = 0; i < x.size(); ++i) want[i] = kern::round_to_half(x[i], f);
    auto d = testing::to_device(x);
    Buffer<uint16_t> w(x.size(), cuda::device_allocator());
    nccl->all_reduce_half_async(d.data(), w.data(), x.size(), ReduceOp::kAvg, f);
    nccl->wait_all();
    EXPECT_EQ(testing::to_host(d), want);
    auto s = testing::to_device(x);
    Buffer<float> out(x.size(), cuda::device_allocator());
    nccl->reduce_scatter_half(s.data(), w.data(), out.data(), x.size(), ReduceOp::kSum, f);
    EXPECT_EQ(testing::to_host(out), want);
    auto r = testing::to_device(x);  // to the owner (the sharded optimizer's buckets)
    nccl->reduce_half_async(r.data(), w.data(), x.size(), ReduceOp::kAvg, 0, f);
    nccl->wait_all();
    EXPECT_EQ(testing::to_host(r), want);
  }
  auto r = testing::to_device(x);
  nccl->reduce_async(r.data(), x.size(), ReduceOp::kAvg, 0);
  nccl->wait_all();
  EXPECT_EQ(testing::to_host(r), x);
}
#endif

}  // namespace
}  // namespace lansbert
