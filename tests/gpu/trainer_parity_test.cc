// The trainer with backend: cuda against the CPU trainer: the same tiny model, tiny synthetic
// shards, seed and dropout masks (Philox), four updates of two accumulated micro-batches
// each. The final checkpoints (written from device buffers through host copies) must agree
// per tensor within 1e-4 relative for params and the moments. A run stopped after step 2 and
// resumed (checkpoint read back to the device) must match the straight device run. TF32 is
// only smoke-tested (finite, same order of loss); bf16 and fp16 are compared with the CPU
// backend's emulation of the same GEMMs. Skipped without a device.
#include <gtest/gtest.h>

#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "cuda_device_backend.h"
#include "gpu_test_util.h"
#include "lansbert/dist/communicator.h"
#include "lansbert/train/checkpoint.h"
#include "lansbert/train/device_backend.h"
#include "lansbert/train/trainer.h"
#include "train_test_util.h"

namespace lansbert {
namespace {
namespace fs = std::filesystem;

// Under the system temp directory, not the build tree: the gpu-check bundle runs on another
// machine where this build's paths do not exist. A folder per process and test: ctest -j runs
// these tests (and their emulator builds) side by side, and one's set-up must not remove
// another's files.
std::string scratch(const std::string& name) {
  const fs::path p = fs::temp_directory_path() /
                     ("lansbert-gpu-trainer-" + std::to_string(::getpid())) /
                     ::testing::UnitTest::GetInstance()->current_test_info()->name() / name;
  fs::remove_all(p);
  fs::create_directories(p);
  return p.string();
}

Status train(const TrainConfig& c, TrainResult* r, const std::string& resume = "", int64_t stop = -1) {
  auto comm = make_single_process_communicator();
  TrainOptions o;
  o.resume = resume;
  o.stop_at_step = stop;
  o.log = nullptr;
  o.handle_signals = false;
  return run_training(c, *comm, o, r);
}

struct Saved {
  std::vector<float> p, m, v;
  OptimizerState state;
};

Saved load(const std::string& root, const ParamTable& table) {
  Saved s;
  std::string dir;
  EXPECT_TRUE(resolve_checkpoint(root, &dir).is_ok()) << root;
  s.p.assign(table.total_elements(), 0.f);
  s.m.assign(table.total_elements(), 0.f);
  s.v.assign(table.total_elements(), 0.f);
  CheckpointMeta meta;
  EXPECT_TRUE(read_checkpoint_meta(dir, &meta).is_ok()) << dir;
  EXPECT_TRUE(load_checkpoint_params(dir, meta, table, s.p.data()).is_ok());
  EXPECT_TRUE(load_checkpoint_optimizer(dir, meta, table.total_elements(), &s.state, s.m.data(), s.v.data()).is_ok());
  return s;
}

// Worst per-tensor relative error (relative to the tensor's largest reference value). Tensors
// whose gradient is pure rounding noise (testing::zero_in_exact_arithmetic) take noise-driven
// steps that no two backends share; they are compared only when `exact` (same backend, same
// order: a resumed run must reproduce them too).
double compare(const ParamTable& table, const Saved& got, const Saved& want, double tol, const char* what,
               bool exact = false) {
  double worst = 0;
  for (const ParamEntry& e : table.entries()) {
    if (!exact && testing::zero_in_exact_arithmetic(e.name)) continue;
    auto slice = [&](const std::vector<float>& x) {
      return std::vector<float>(x.begin() + e.offset, x.begin() + e.offset + e.numel);
    };
    for (auto [g, w, name] : {std::tuple{&got.p, &want.p, "params"}, std::tuple{&got.m, &want.m, "m"},
                              std::tuple{&got.v, &want.v, "v"}}) {
      const testing::ErrorStats s = testing::compare(slice(*g), slice(*w));
      worst = std::max(worst, s.rel());
      EXPECT_LE(s.rel(), tol) << what << " " << name << " " << e.name << ": max_abs " << s.max_abs;
    }
  }
  std::printf("  %-36s worst per-tensor rel error %.3e\n", what, worst);
  return worst;
}

class GpuTrainer : public ::testing::Test {
 protected:
  void SetUp() override {
    LB_REQUIRE_GPU();
    register_device_backend("cuda", cuda::make_device_backend);
    data_ = scratch("data");
    ASSERT_FALSE(testing::write_tiny_shards(data_).empty());
  }
  std::string data_;
};

TEST_F(GpuTrainer, CudaMatchesCpuTrainer) {
  TrainConfig c = testing::tiny_config(data_, scratch("cpu"), 4);
  TrainConfig g = testing::tiny_config(data_, scratch("cuda"), 4);
  g.backend = "cuda";
  TrainResult rc, rg;
  Status s = train(c, &rc);
  ASSERT_TRUE(s.is_ok()) << s.to_string();
  s = train(g, &rg);
  ASSERT_TRUE(s.is_ok()) << s.to_string();
  EXPECT_EQ(rg.step, 4);
  std::printf("  loss cpu %.6f cuda %.6f\n", rc.loss, rg.loss);
  EXPECT_NEAR(rg.loss, rc.loss, 1e-4 * std::fabs(rc.loss));
  BertConfig mc;
  ASSERT_TRUE(c.resolve_model(&mc).is_ok());
  const ParamTable table = make_bert_param_table(mc);
  const Saved a = load(c.checkpoint.dir, table), b = load(g.checkpoint.dir, table);
  EXPECT_EQ(a.state.step, b.state.step);
  compare(table, b, a, 1e-4, "cuda vs cpu after 4 updates");
}

// logging.noise_scale on the device: the first micro-batch's sum of squares is the device's
// (DeviceBackend::gradient_sum_squares), and the window's estimate matches the CPU run's.
TEST_F(GpuTrainer, NoiseScaleOnDeviceMatchesCpu) {
  TrainConfig c = testing::tiny_config(data_, scratch("noise-cpu"), 2);
  c.batch.micro_batch = 8;
  c.logging.every_steps = 2;
  c.logging.noise_scale = true;
  TrainConfig g = c;
  g.checkpoint.dir = scratch("noise-cuda");
  g.backend = "cuda";
  TrainResult rc, rg;
  ASSERT_TRUE(train(c, &rc).is_ok());
  ASSERT_TRUE(train(g, &rg).is_ok());
  auto noise_of = [](const TrainConfig& t) {
    std::ifstream f(t.metrics_path());
    std::string line;
    std::getline(f, line);
    return nlohmann::json::parse(line).at("noise");
  };
  const nlohmann::json a = noise_of(c), b = noise_of(g);
  std::printf("  noise cpu %s\n  noise cuda %s\n", a.dump().c_str(), b.dump().c_str());
  for (const char* k : {"grad_sq", "trace", "scale"})
    EXPECT_NEAR(b.at(k).get<double>(), a.at(k).get<double>(), 1e-3 * std::fabs(a.at(k).get<double>())) << k;
  EXPECT_EQ(b.at("steps"), 2);
}

TEST_F(GpuTrainer, StopAndResumeOnDeviceMatchesStraightRun) {
  TrainConfig a = testing::tiny_config(data_, scratch("straight"), 4);
  TrainConfig b = testing::tiny_config(data_, scratch("resumed"), 4);
  a.backend = b.backend = "cuda";
  TrainResult r;
  Status s = train(a, &r);
  ASSERT_TRUE(s.is_ok()) << s.to_string();
  s = train(b, &r, "", 2);
  ASSERT_TRUE(s.is_ok()) << s.to_string();
  EXPECT_EQ(r.step, 2);
  s = train(b, &r, "latest");
  ASSERT_TRUE(s.is_ok()) << s.to_string();
  EXPECT_EQ(r.step, 4);
  BertConfig mc;
  ASSERT_TRUE(a.resolve_model(&mc).is_ok());
  const ParamTable table = make_bert_param_table(mc);
  compare(table, load(b.checkpoint.dir, table), load(a.checkpoint.dir, table), 1e-6, "resumed vs straight (cuda)",
          /*exact=*/true);
}

TEST_F(GpuTrainer, Tf32Trains) {
  TrainConfig t = testing::tiny_config(data_, scratch("tf32"), 2);
  t.backend = "cuda";
  t.precision.tf32 = true;
  TrainResult r;
  Status s = train(t, &r);
  ASSERT_TRUE(s.is_ok()) << s.to_string();
  EXPECT_TRUE(std::isfinite(r.loss));
}

// bf16 and fp16 GEMMs on the device against the CPU's emulation of them (the same operand
// rounding, fp32 sums in another order), ten updates. A value that lands near a rounding
// boundary can round the other way on one side, which moves results by a 16-bit ulp
// (2^-8 relative for bf16) locally; over ten updates the per-tensor error stays far below
// that. Bound: 2e-3 relative per tensor (fp32 parity is 1e-4).
TEST_F(GpuTrainer, MixedPrecisionMatchesCpuEmulation) {
  for (const char* dtype : {"bf16", "fp16"}) {
    TrainConfig c = testing::tiny_config(data_, scratch(std::string("cpu-") + dtype), 10);
    TrainConfig g = testing::tiny_config(data_, scratch(std::string("cuda-") + dtype), 10);
    c.precision.dtype = g.precision.dtype = dtype;
    g.backend = "cuda";
    TrainResult rc, rg;
    Status s = train(c, &rc);
    ASSERT_TRUE(s.is_ok()) << s.to_string();
    s = train(g, &rg);
    ASSERT_TRUE(s.is_ok()) << s.to_string();
    std::printf("  %s loss cpu %.6f cuda %.6f\n", dtype, rc.loss, rg.loss);
    EXPECT_NEAR(rg.loss, rc.loss, 1e-3 * std::fabs(rc.loss)) << dtype;
    BertConfig mc;
    ASSERT_TRUE(c.resolve_model(&mc).is_ok());
    const ParamTable table = make_bert_param_table(mc);
    compare(table, load(g.checkpoint.dir, table), load(c.checkpoint.dir, table), 2e-3,
            (std::string(dtype) + " cuda vs cpu emulation, 10 updates").c_str());
  }
}

}  // namespace
}  // namespace lansbert
