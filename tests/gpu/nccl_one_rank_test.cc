// The NCCL communicator on one GPU as a one-rank job: what a single-GPU machine can check of
// the multi-GPU path (unique id through the bootstrap, ncclCommInitRank, the communication
// stream ordered after the compute stream by events, the polling waits, in-place all-gather,
// GradSync's asynchronous bucket reductions over device buffers, and a ShardedStep whose
// device optimizer runs with a shard spec and host norm sums). With one rank every reduction
// is an identity (and ShardedStep skips its collectives), so results are exact. Two or more
// GPUs are needed to check that reductions actually sum. Skipped without a device.
#include <gtest/gtest.h>

#include "gpu_test_util.h"

#if defined(LANSBERT_HAVE_NCCL)
#include <cuda_runtime.h>

#include "cuda_ops.cuh"
#include "lansbert/dist/grad_sync.h"
#include "lansbert/dist/sharded_step.h"
#include "lansbert/model/bert_config.h"
#include "nccl_communicator.h"

namespace lansbert {
namespace {

TEST(GpuNccl, OneRankCollectivesAreIdentities) {
  LB_REQUIRE_GPU();
  std::unique_ptr<Communicator> boot = make_single_process_communicator();
  std::unique_ptr<Communicator> nccl = cuda::make_nccl_communicator(*boot);
  ASSERT_EQ(nccl->world(), 1);
  ASSERT_STREQ(nccl->kind(), "nccl");
  std::unique_ptr<Ops<float>> ops = cuda::make_ops();
  cuda::set_nccl_compute_stream(*nccl, static_cast<cuda::CudaOps&>(*ops).stream());

  const std::vector<float> x = testing::random_vector(4099, 5);
  auto d = testing::to_device(x);
  nccl->all_reduce(d.data(), x.size(), ReduceOp::kAvg);
  EXPECT_EQ(testing::to_host(d), x);
  Buffer<float> out(x.size(), cuda::device_allocator());
  nccl->reduce_scatter(d.data(), out.data(), x.size(), ReduceOp::kAvg);
  EXPECT_EQ(testing::to_host(out), x);
  nccl->all_gather(d.data(), d.data(), x.size());  // in place
  EXPECT_EQ(testing::to_host(d), x);
  nccl->broadcast(d.data(), x.size() * sizeof(float), 0);
  EXPECT_EQ(testing::to_host(d), x);

  // Asynchronous all-reduces ordered after work queued on the compute stream: a kernel that
  // writes the buffer (the model's zero) must land before the reduction reads it.
  ops->zero(d.data(), x.size());
  nccl->all_reduce_async(d.data(), x.size(), ReduceOp::kAvg);
  nccl->wait_all();
  EXPECT_EQ(testing::to_host(d), std::vector<float>(x.size(), 0.f));
}

TEST(GpuNccl, GradSyncAndShardedStepOnDeviceBuffers) {
  LB_REQUIRE_GPU();
  std::unique_ptr<Communicator> boot = make_single_process_communicator();
  std::unique_ptr<Communicator> nccl = cuda::make_nccl_communicator(*boot);
  BertConfig cfg;
  ASSERT_TRUE(bert_preset("bert-tiny", &cfg).is_ok());
  const ParamTable table = make_bert_param_table(cfg);
  const std::vector<float> g = testing::random_vector(table.total_elements(), 6, 0.01f);
  auto gd = testing::to_device(g);
  GradSync sync(table, gd.data(), *nccl, {size_t(64) << 10, ReduceOp::kAvg, std::nullopt});
  sync.begin(true);
  for (size_t e = table.size(); e-- > 0;) sync.on_ready(e, e + 1);  // backward's order
  sync.finish();
  EXPECT_EQ(testing::to_host(gd), g);

  // ShardedStep with device buffers and the device optimizer: one rank, so the update
  // equals the plain device update.
  UpdaterConfig uc;
  uc.schedule.kind = ScheduleKind::kConstant;
  uc.schedule.peak_lr = 1e-3;
  auto make = [&](std::unique_ptr<Updater>* u) {
    std::unique_ptr<Optimizer> opt;
    ASSERT_TRUE(cuda::make_device_optimizer("lans", uc.optimizer, &opt).is_ok());
    UpdaterDeviceHooks hooks;
    hooks.unscale_and_check = [](const ParamTable& t, float* gr, double s, size_t b, size_t e) {
      return cuda::unscale_and_check(t, gr, s, b, e);
    };
    hooks.zero = [](float* p, size_t n) { cuda::device_allocator().set_zero(p, n * sizeof(float)); };
    ASSERT_TRUE(Updater::create(uc, std::move(opt), std::move(hooks), u).is_ok());
  };
  std::unique_ptr<Updater> a, b;
  make(&a);
  make(&b);
  ShardedStep step(table, *nccl, *boot, *a, cuda::device_allocator());
  const size_t n = table.total_elements();
  const std::vector<float> p = testing::random_vector(n, 7, 0.05f), zeros(n, 0.f);
  auto pa = testing::to_device(p), ga = testing::to_device(g), ma = testing::to_device(zeros),
       va = testing::to_device(zeros);
  auto pb = testing::to_device(p), gb = testing::to_device(g), mb = testing::to_device(zeros),
       vb = testing::to_device(zeros);
  StepReport ra, rb;
  ASSERT_TRUE(step.step(pa.data(), ga.data(), ma.data(), va.data(), &ra).is_ok());
  ASSERT_TRUE(b->step(table, {pb.data(), gb.data(), mb.data(), vb.data()}, &rb).is_ok());
  EXPECT_EQ(testing::to_host(pa), testing::to_host(pb));
  EXPECT_EQ(ra.stats.grad_norm, rb.stats.grad_norm);
}

}  // namespace
}  // namespace lansbert
#endif  // LANSBERT_HAVE_NCCL
