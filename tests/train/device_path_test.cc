// The trainer's device path (backend: cuda) driven by a host stand-in for the device
// (host_device_backend.h): the same ops, optimizer and loss scaler as the CPU backend behind
// the DeviceBackend interface, so every result must equal the CPU trainer's bit for bit.
// This is the only place the device branches of the trainer run on a machine without a GPU:
// opening the backend, the Updater's device hooks, host staging of checkpoint writes,
// uploads of restored checkpoints and --init-from, and the precision options.
#include <gtest/gtest.h>
#include <omp.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "host_device_backend.h"
#include "lansbert/core/file_io.h"
#include "lansbert/dist/comm_bench.h"
#include "lansbert/model/param_table.h"
#include "lansbert/train/checkpoint.h"
#include "lansbert/train/device_backend.h"
#include "lansbert/train/evaluate.h"
#include "train_run_util.h"
#include "train_test_util.h"

namespace lansbert {
namespace {
namespace fs = std::filesystem;
using testing::scratch;
using testing::slurp;
using testing::train;

bool same_file(const std::string& a, const std::string& b) { return slurp(a) == slurp(b); }

class DevicePath : public ::testing::Test {
 protected:
  void SetUp() override {
    omp_set_num_threads(1);
    // The registry keeps the factory; the backend it makes is observed through `last_`.
    register_device_backend("cuda", [this](std::unique_ptr<DeviceBackend>* out) {
      auto b = std::make_unique<testing::HostDeviceBackend>();
      b->options_seen = &options_seen_;
      b->free_bytes = free_bytes_;
      if (!name_.empty()) b->name = name_;
      b->cc = cc_;
      last_ = b.get();
      *out = std::move(b);
      return Status::ok();
    });
    data_ = scratch("data");
    ASSERT_FALSE(testing::write_tiny_shards(data_).empty());
  }
  void TearDown() override { unregister_device_backend("cuda"); }
  std::string data_;
  testing::HostDeviceBackend* last_ = nullptr;  // valid while its run lasts
  DeviceOptions options_seen_;                   // the last make_ops call's, kept after it
  size_t free_bytes_ = 0;                        // the device's free memory (0: unknown)
  std::string name_;                             // the device's description ("": the stand-in's)
  int cc_ = 0;                                   // its compute capability (0: unknown)
};

// Straight runs: the device path equals the CPU path, checkpoint files byte for byte, and
// the device pieces were really used (optimizer made by the backend, one unscale check per
// step).
TEST_F(DevicePath, EqualsTheCpuTrainerBitForBit) {
  TrainConfig c = testing::tiny_config(data_, scratch("cpu"), 6);
  TrainConfig d = testing::tiny_config(data_, scratch("dev"), 6);
  d.backend = "cuda";
  TrainResult rc, rd;
  ASSERT_TRUE(train(c, &rc).is_ok());
  size_t unscale = 0, optimizers = 0;
  TrainOptions o;
  auto comm = make_single_process_communicator();
  o.log = nullptr;
  o.after_step = [&](int64_t) {
    unscale = last_->unscale_calls;
    optimizers = last_->optimizers_made;
  };
  ASSERT_TRUE(run_training(d, *comm, o, &rd).is_ok());
  EXPECT_EQ(unscale, 6u);
  EXPECT_EQ(optimizers, 1u);
  EXPECT_EQ(rc.loss, rd.loss);
  for (const char* f : {"model.safetensors", "optimizer.state"})
    EXPECT_TRUE(same_file(c.checkpoint.dir + "/final/" + f, d.checkpoint.dir + "/final/" + f)) << f;
}

// A run whose plan does not fit the device's free memory stops before it allocates or
// writes anything, naming the parts and the keys that shrink them; one that fits runs and
// logs what it needs of what is free.
TEST_F(DevicePath, RunThatCannotFitTheDeviceIsRefusedBeforeItStarts) {
  TrainConfig c = testing::tiny_config(data_, scratch("too-big"), 2);
  c.backend = "cuda";
  TrainPlan plan;
  ASSERT_TRUE(make_plan(c, 1, &plan).is_ok());
  const size_t need = plan.flat_bytes + plan.half_bytes + plan.activation_bytes;
  free_bytes_ = need - 1;
  TrainResult r;
  Status st = train(c, &r);
  EXPECT_EQ(st.code(), StatusCode::kInvalidArgument) << st.to_string();
  for (const char* part : {"free memory on host stand-in", "flat buffers", "activations", "--dry-run",
                           "batch.micro_batch", "batch.recompute: attention or layers"})
    EXPECT_NE(st.message().find(part), std::string::npos) << part << " in: " << st.message();
  EXPECT_TRUE(fs::is_empty(c.checkpoint.dir)) << "the refused run wrote into " << c.checkpoint.dir;
  // With whole layers recomputed already, recomputation is not suggested again.
  c.batch.recompute = Recompute::kLayers;
  ASSERT_TRUE(make_plan(c, 1, &plan).is_ok());
  free_bytes_ = plan.flat_bytes + plan.half_bytes + plan.activation_bytes - 1;
  st = train(c, &r);
  EXPECT_EQ(st.code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(st.message().find("batch.recompute"), std::string::npos) << st.message();
  // Enough memory: it runs.
  free_bytes_ = need;
  c.batch.recompute = Recompute::kNone;
  st = train(c, &r);
  EXPECT_TRUE(st.is_ok()) << st.to_string();
  EXPECT_EQ(r.step, 2);
}

// On a device in the peak table the metrics carry MFU: TFLOP/s over the dense peak for the
// run's GEMM precision (H200: 989 bf16, 67 fp32); a device not in the table, and the CPU,
// write none.
TEST_F(DevicePath, MetricsCarryMfuAgainstTheDevicesPeak) {
  auto mfu_lines = [](const std::string& metrics, double peak) {
    std::ifstream f(metrics);
    int n = 0;
    for (std::string line; std::getline(f, line);) {
      const auto j = nlohmann::json::parse(line);
      if (j.contains("type")) continue;  // evaluation lines
      ++n;
      if (peak <= 0) {
        EXPECT_FALSE(j.contains("mfu")) << line;
        continue;
      }
      EXPECT_NEAR(j.at("mfu").get<double>(), j.at("tflops").get<double>() / peak, 1e-12 + 1e-9 * j.at("mfu").get<double>())
          << line;
    }
    return n;
  };
  for (const char* dtype : {"bf16", "fp32"}) {
    TrainConfig c = testing::tiny_config(data_, scratch(std::string("mfu-") + dtype), 4);
    c.backend = "cuda";
    c.precision.dtype = dtype;
    c.logging.every_steps = 2;
    name_ = "NVIDIA H200 (sm_90, 139 GiB)";
    TrainResult r;
    ASSERT_TRUE(train(c, &r).is_ok());
    EXPECT_EQ(mfu_lines(c.metrics_path(), std::string(dtype) == "bf16" ? 989 : 67), 2) << dtype;
  }
  TrainConfig c = testing::tiny_config(data_, scratch("mfu-unknown"), 2);
  c.backend = "cuda";
  name_ = "";
  TrainResult r;
  ASSERT_TRUE(train(c, &r).is_ok());
  EXPECT_EQ(mfu_lines(c.metrics_path(), 0), 1);  // 2 steps, a line every 5 and at the end
  TrainConfig cpu = testing::tiny_config(data_, scratch("mfu-cpu"), 2);
  ASSERT_TRUE(train(cpu, &r).is_ok());
  EXPECT_EQ(mfu_lines(cpu.metrics_path(), 0), 1);
}

// Stop after step 3 and resume on the device: the restored params and moments are uploaded
// (copy_from_host) and the run ends where a straight device run ends.
TEST_F(DevicePath, ResumeUploadsTheCheckpointAndContinuesExactly) {
  TrainConfig a = testing::tiny_config(data_, scratch("straight"), 6);
  TrainConfig b = testing::tiny_config(data_, scratch("resumed"), 6);
  a.backend = b.backend = "cuda";
  TrainResult r;
  ASSERT_TRUE(train(a, &r).is_ok());
  ASSERT_TRUE(train(b, &r, "", 3).is_ok());
  EXPECT_EQ(r.step, 3);
  size_t uploaded = 0;
  ASSERT_TRUE(train(b, &r, "latest", -1, [&](int64_t) { uploaded = last_->allocator_.uploads; }).is_ok());
  EXPECT_EQ(r.step, 6);
  // params, m and v went up.
  BertConfig mc;
  ASSERT_TRUE(b.resolve_model(&mc).is_ok());
  EXPECT_GE(uploaded, 3 * make_bert_param_table(mc).total_elements() * sizeof(float));
  for (const char* f : {"model.safetensors", "optimizer.state"})
    EXPECT_TRUE(same_file(a.checkpoint.dir + "/final/" + f, b.checkpoint.dir + "/final/" + f)) << f;
}

// checkpoint.async on a device: the copies come down from the device at the step boundary
// and are written by rank 0's thread; the files equal the synchronous device run's.
TEST_F(DevicePath, CheckpointsInTheBackgroundEqualTheSynchronousOnes) {
  TrainConfig a = testing::tiny_config(data_, scratch("dev-sync"), 5);
  a.backend = "cuda";
  a.checkpoint.every_steps = 2;
  a.checkpoint.keep_last = 5;
  TrainConfig b = a;
  b.checkpoint.dir = scratch("dev-async");
  b.checkpoint.async = true;
  TrainResult r;
  ASSERT_TRUE(train(a, &r).is_ok());
  ASSERT_TRUE(train(b, &r).is_ok());
  for (const int64_t step : {2, 4, 5})
    for (const char* f : {"model.safetensors", "optimizer.state"})
      EXPECT_TRUE(same_file(checkpoint_step_dir(a.checkpoint.dir, step) + "/" + f,
                            checkpoint_step_dir(b.checkpoint.dir, step) + "/" + f))
          << step << " " << f;
}

// Phase 2 from a phase-1 device checkpoint (--init-from) equals the same on the CPU.
TEST_F(DevicePath, InitFromAPhase1CheckpointEqualsTheCpuPath) {
  TrainConfig p1 = testing::tiny_config(data_, scratch("phase1"), 3);
  TrainResult r;
  ASSERT_TRUE(train(p1, &r).is_ok());
  TrainConfig c = testing::tiny_config(data_, scratch("p2-cpu"), 3);
  TrainConfig d = testing::tiny_config(data_, scratch("p2-dev"), 3);
  d.backend = "cuda";
  ASSERT_TRUE(train(c, &r, "", -1, nullptr, p1.checkpoint.dir).is_ok());
  ASSERT_TRUE(train(d, &r, "", -1, nullptr, p1.checkpoint.dir).is_ok());
  EXPECT_TRUE(same_file(c.checkpoint.dir + "/final/model.safetensors", d.checkpoint.dir + "/final/model.safetensors"));
}

// The precision options reach the device's ops (bf16 GEMMs on the device path equal the CPU
// backend's bf16 emulation), and fp16's dynamic loss scale reaches the device unscale hook.
// precision.gemm_cast reaches them too (bf16: cublas, fp16: kernel); the stand-in has one
// rounding, so the checkpoints stay equal.
TEST_F(DevicePath, PrecisionReachesTheDeviceOps) {
  for (const char* dtype : {"bf16", "fp16"}) {
    TrainConfig c = testing::tiny_config(data_, scratch(std::string("cpu-") + dtype), 4);
    TrainConfig d = testing::tiny_config(data_, scratch(std::string("dev-") + dtype), 4);
    c.precision.dtype = d.precision.dtype = dtype;
    d.backend = "cuda";
    const bool cublas = std::string(dtype) == "bf16";
    d.precision.gemm_cast = cublas ? "cublas" : "kernel";
    TrainResult r;
    ASSERT_TRUE(train(c, &r).is_ok());
    GemmMath seen = GemmMath::kFp32;
    ASSERT_TRUE(train(d, &r, "", -1, [&](int64_t) { seen = last_->last_math; }).is_ok());
    EXPECT_EQ(seen, std::string(dtype) == "bf16" ? GemmMath::kBf16 : GemmMath::kFp16);
    EXPECT_EQ(options_seen_.cast_in_gemm, cublas) << dtype;
    EXPECT_TRUE(same_file(c.checkpoint.dir + "/final/model.safetensors", d.checkpoint.dir + "/final/model.safetensors"))
        << dtype;
  }
}

// A V100 (sm_70) has no bf16 tensor cores: a bf16 run stops before it starts, naming the
// setting, the device and fp16; tf32 runs (as fp32 in cuBLAS) and says so in the log; an
// A100 takes bf16. Evaluating a bf16 checkpoint there is refused with --backend cpu as the way.
TEST_F(DevicePath, PrecisionTheDeviceLacksIsRefusedAtStartUp) {
  name_ = "Tesla V100-SXM2-32GB (sm_70, 31 GiB)";
  cc_ = 70;
  TrainConfig c = testing::tiny_config(data_, scratch("v100-bf16"), 2);
  c.backend = "cuda";
  c.precision.dtype = "bf16";
  TrainResult r;
  Status st = train(c, &r);
  EXPECT_EQ(st.code(), StatusCode::kInvalidArgument) << st.to_string();
  for (const char* part : {"precision.dtype: bf16", "sm_80", "Tesla V100-SXM2-32GB", "use precision.dtype: fp16"})
    EXPECT_NE(st.message().find(part), std::string::npos) << part << " in: " << st.message();
  EXPECT_TRUE(fs::is_empty(c.checkpoint.dir)) << "the refused run wrote into " << c.checkpoint.dir;

  // tf32 runs, with a note in the log.
  c.precision.dtype = "fp32";
  c.precision.tf32 = true;
  c.checkpoint.dir = scratch("v100-tf32");
  const std::string log_path = scratch("v100-tf32-log") + "/log.txt";
  FILE* log = std::fopen(log_path.c_str(), "w");
  ASSERT_NE(log, nullptr);
  auto comm = make_single_process_communicator();
  TrainOptions o;
  o.log = log;
  st = run_training(c, *comm, o, &r);
  std::fclose(log);
  EXPECT_TRUE(st.is_ok()) << st.to_string();
  EXPECT_NE(slurp(log_path).find("precision.tf32: tf32 on Tesla V100-SXM2-32GB (sm_70, 31 GiB): no TF32 tensor cores"),
            std::string::npos) << slurp(log_path);

  // fp16 on the V100, bf16 on an A100: no refusal.
  c.precision.tf32 = false;
  c.precision.dtype = "fp16";
  c.checkpoint.dir = scratch("v100-fp16");
  EXPECT_TRUE(train(c, &r).is_ok());
  cc_ = 80;
  c.precision.dtype = "bf16";
  c.checkpoint.dir = scratch("a100-bf16");
  ASSERT_TRUE(train(c, &r).is_ok());

  // The bf16 checkpoint evaluated on the V100.
  cc_ = 70;
  BertConfig mc;
  ASSERT_TRUE(c.resolve_model(&mc).is_ok());
  EvalOptions eo = testing::tiny_eval_options(c, 16);
  eo.backend = "cuda";
  eo.math = GemmMath::kBf16;
  EvalResult er;
  st = run_eval(mc, c.checkpoint.dir + "/final", eo, &er);
  EXPECT_EQ(st.code(), StatusCode::kInvalidArgument) << st.to_string();
  EXPECT_NE(st.message().find("--backend cpu"), std::string::npos) << st.message();
}

// precision.attention auto with batch.recompute: attention on a device lays out a statistics
// buffer per layer for a fused attention (ModelLimits::attention_stats); where the ops never
// fuse (the stand-in's CPU ops) every layer is recomputed as before and the run equals the
// CPU trainer's bit for bit.
TEST_F(DevicePath, AttentionStatisticsLayoutWithoutAFusedAttentionChangesNothing) {
  TrainConfig c = testing::tiny_config(data_, scratch("cpu-recompute"), 4);
  TrainConfig d = testing::tiny_config(data_, scratch("dev-recompute"), 4);
  c.batch.recompute = d.batch.recompute = Recompute::kAttention;
  d.backend = "cuda";
  d.precision.attention = "auto";
  ASSERT_TRUE(d.model_limits().attention_stats);
  ASSERT_FALSE(c.model_limits().attention_stats);
  TrainResult rc, rd;
  ASSERT_TRUE(train(c, &rc).is_ok());
  ASSERT_TRUE(train(d, &rd).is_ok());
  EXPECT_EQ(rc.loss, rd.loss);
  EXPECT_TRUE(same_file(c.checkpoint.dir + "/final/model.safetensors", d.checkpoint.dir + "/final/model.safetensors"));
}

// `lansbert eval --backend cuda`: the checkpoint's weights staged to the device, the same
// numbers as the CPU evaluation.
TEST_F(DevicePath, EvalOnTheDeviceEqualsTheCpu) {
  TrainConfig c = testing::tiny_config(data_, scratch("for-eval"), 3);
  TrainResult r;
  ASSERT_TRUE(train(c, &r).is_ok());
  BertConfig mc;
  ASSERT_TRUE(c.resolve_model(&mc).is_ok());
  EvalOptions o = testing::tiny_eval_options(c, 50);
  EvalResult cpu_r, dev_r;
  ASSERT_TRUE(run_eval(mc, c.checkpoint.dir + "/final", o, &cpu_r).is_ok());
  o.backend = "cuda";
  ASSERT_TRUE(run_eval(mc, c.checkpoint.dir + "/final", o, &dev_r).is_ok());
  EXPECT_EQ(dev_r.sequences, 50);
  EXPECT_EQ(cpu_r.mlm_loss, dev_r.mlm_loss);
  EXPECT_EQ(cpu_r.nsp_loss, dev_r.nsp_loss);
  EXPECT_EQ(cpu_r.mlm_accuracy, dev_r.mlm_accuracy);
  EXPECT_FALSE(options_seen_.cast_in_gemm);
  // The checkpoint's gemm_cast travels with its math to the device's ops.
  o.math = GemmMath::kBf16;
  o.cast_in_gemm = true;
  ASSERT_TRUE(run_eval(mc, c.checkpoint.dir + "/final", o, &dev_r).is_ok());
  EXPECT_EQ(options_seen_.math, GemmMath::kBf16);
  EXPECT_TRUE(options_seen_.cast_in_gemm);
}

// bench-comm --backend cuda's loop: the buffer lives in the device allocator, the check values
// go in and out through it, and the rows check out.
TEST(DeviceCommBench, BufferLivesInTheGivenMemory) {
  testing::CountingHostAllocator memory;
  auto comm = make_single_process_communicator();
  auto host = make_single_process_communicator();
  const auto rows = bench_all_reduce(*comm, {8, 4096}, 2, 1, false, &memory, host.get());
  ASSERT_EQ(rows.size(), 2u);
  for (const CommBenchRow& r : rows) EXPECT_TRUE(r.correct) << r.bytes;
  EXPECT_GE(memory.uploads, 2 * (8 + 4096));  // fill and zero per size
  EXPECT_GE(memory.downloads, 8 + 4096);      // the check
}

}  // namespace
}  // namespace lansbert
