// The training loop end to end on a tiny model and tiny synthetic shards: the loss falls,
// stop + resume is bit-identical to a straight run, SIGTERM leaves a loadable checkpoint,
// stale temporary directories are ignored, corrupt checkpoints are refused without touching
// anything, phase 2 starts from a checkpoint, export works, half precision tracks fp32.
// The held-out evaluation during training: trainer_eval_test.cc.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <csignal>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "lansbert/core/file_io.h"
#include "lansbert/train/checkpoint.h"
#include "lansbert/train/device_backend.h"
#include "lansbert/train/evaluate.h"
#include "lansbert/train/trainer.h"
#include "tiny_shards_fixture.h"
#include "train_run_util.h"
#include "train_test_util.h"

namespace lansbert {
namespace {
namespace fs = std::filesystem;

using testing::scratch;
using testing::train;

using testing::slurp;

std::vector<std::string> listing(const std::string& dir) {
  std::vector<std::string> out;
  for (const auto& e : fs::recursive_directory_iterator(dir))
    out.push_back(e.path().string() + ":" + (e.is_regular_file() ? std::to_string(e.file_size()) : "d"));
  std::sort(out.begin(), out.end());
  return out;
}

using TrainerTest = testing::TinyShardsTest;

TEST_F(TrainerTest, LossFallsAndAccuracyRises) {
  TrainConfig c = testing::tiny_config(*data_, scratch("falls"), 100);
  c.schedule.peak_lr = 0.02;
  c.logging.every_steps = 10;
  TrainResult r;
  ASSERT_TRUE(train(c, &r).is_ok());
  EXPECT_EQ(r.step, 100);
  std::printf("first window loss %.3f, last %.3f, mlm acc %.3f, nsp acc %.3f\n", r.first_loss, r.loss,
              r.mlm_accuracy, r.nsp_accuracy);
  // total = mlm + nsp; chance is ln(64) + ln(2) = 4.85.
  EXPECT_GT(r.first_loss, 4.0);
  EXPECT_LT(r.loss, std::log(64.0) + std::log(2.0) - 1.2);
  EXPECT_GT(r.mlm_accuracy, 0.4);
  // One metrics line per window.
  std::ifstream f(c.metrics_path());
  int lines = 0;
  for (std::string l; std::getline(f, l);) ++lines;
  EXPECT_EQ(lines, 10);
}

TEST_F(TrainerTest, ResumeIsBitIdentical) {
  const std::string a = scratch("straight"), b = scratch("resumed");
  TrainConfig ca = testing::tiny_config(*data_, a, 12), cb = testing::tiny_config(*data_, b, 12);
  TrainResult ra, rb1, rb2;
  ASSERT_TRUE(train(ca, &ra).is_ok());
  ASSERT_TRUE(train(cb, &rb1, "", 5).is_ok());
  EXPECT_EQ(rb1.step, 5);
  ASSERT_TRUE(train(cb, &rb2, "latest").is_ok());
  EXPECT_EQ(rb2.step, 12);
  EXPECT_EQ(ra.micro_step, rb2.micro_step);
  EXPECT_EQ(slurp(a + "/step-000000012/model.safetensors"), slurp(b + "/step-000000012/model.safetensors"));
  EXPECT_EQ(slurp(a + "/step-000000012/optimizer.state"), slurp(b + "/step-000000012/optimizer.state"));
  EXPECT_TRUE(fs::exists(b + "/final/trainer.json"));
}

// With bf16 and fp16 GEMMs a forward reads the weights from the copy the optimizer wrote in
// its last update (BertModel::weight_copy), except in a run's first step, which casts them.
// The resumed run casts at step 6 where the straight run reads the copy: equal checkpoints say
// that the copy held exactly the rounded weights.
TEST_F(TrainerTest, HalfPrecisionResumeIsBitIdentical) {
  for (const char* dtype : {"bf16", "fp16"}) {
    const std::string a = scratch(std::string("straight-") + dtype), b = scratch(std::string("resumed-") + dtype);
    TrainConfig ca = testing::tiny_config(*data_, a, 9), cb = testing::tiny_config(*data_, b, 9);
    ca.precision.dtype = cb.precision.dtype = dtype;
    TrainResult ra, rb1, rb2;
    ASSERT_TRUE(train(ca, &ra).is_ok());
    ASSERT_TRUE(train(cb, &rb1, "", 5).is_ok());
    ASSERT_TRUE(train(cb, &rb2, "latest").is_ok());
    EXPECT_EQ(rb2.step, 9);
    EXPECT_TRUE(slurp(a + "/step-000000009/model.safetensors") == slurp(b + "/step-000000009/model.safetensors"))
        << dtype << ": the resumed run's weights differ";
  }
}

// batch.recompute changes memory and time only: a run that recomputes its layers for five
// steps and resumes recomputing its attention ends with the weights of a run that never
// recomputed, and the resume is not refused as another batch setup.
TEST_F(TrainerTest, RecomputeChangesNoResultAndMaySwitchOnResume) {
  for (const char* dtype : {"fp32", "bf16"}) {
    const std::string a = scratch(std::string("kept-") + dtype), b = scratch(std::string("recomputed-") + dtype);
    TrainConfig ca = testing::tiny_config(*data_, a, 9), cb = testing::tiny_config(*data_, b, 9);
    ca.precision.dtype = cb.precision.dtype = dtype;
    cb.batch.recompute = Recompute::kLayers;
    TrainResult ra, rb1, rb2;
    ASSERT_TRUE(train(ca, &ra).is_ok());
    ASSERT_TRUE(train(cb, &rb1, "", 5).is_ok());
    cb.batch.recompute = Recompute::kAttention;
    const Status resumed = train(cb, &rb2, "latest");
    ASSERT_TRUE(resumed.is_ok()) << resumed.to_string();
    EXPECT_EQ(rb2.step, 9);
    EXPECT_EQ(ra.loss, rb2.loss) << dtype;
    EXPECT_TRUE(slurp(a + "/step-000000009/model.safetensors") == slurp(b + "/step-000000009/model.safetensors"))
        << dtype << ": the recomputing run's weights differ";
  }
}

// The model section's fractions are written as their decimal form (0.1); checkpoints from
// before wrote a float's binary expansion (0.10000000149011612). Resume compares them as the
// floats they configure: the old spelling resumes, another value is refused by section.
TEST_F(TrainerTest, ResumeComparesModelFractionsAsFloats) {
  const std::string dir = scratch("fractions");
  TrainConfig c = testing::tiny_config(*data_, dir, 4);
  TrainResult r;
  ASSERT_TRUE(train(c, &r, "", 2).is_ok());
  const std::string meta_path = dir + "/step-000000002/trainer.json";
  const std::string written = slurp(meta_path);
  EXPECT_NE(written.find("\"hidden_dropout\": 0.1,"), std::string::npos) << "not the decimal form";
  auto rewrite = [&](double dropout) {
    auto j = nlohmann::ordered_json::parse(written);
    j.erase("checksum");  // as a file from before checksums; the reader accepts those
    j["config"]["model"]["hidden_dropout"] = dropout;
    std::ofstream(meta_path, std::ios::trunc) << j.dump(2) << "\n";
  };
  rewrite(double(0.1f));  // 0.10000000149011612
  TrainResult r2;
  Status st = train(c, &r2, "latest", 3);
  ASSERT_TRUE(st.is_ok()) << st.to_string();
  EXPECT_EQ(r2.step, 3);
  fs::remove_all(dir + "/step-000000003");  // back to step 2 as the latest
  fs::remove(dir + "/latest");
  fs::create_directory_symlink("step-000000002", dir + "/latest");
  rewrite(0.2);
  st = train(c, &r2, "latest", 3);
  EXPECT_EQ(st.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(st.message().find("incompatible checkpoint: model.hidden_dropout is 0.2 in the checkpoint, 0.1 in the config"),
            std::string::npos)
      << st.to_string();
}

TEST_F(TrainerTest, SigtermFinishesTheStepAndCheckpoints) {
  const std::string dir = scratch("sigterm");
  TrainConfig c = testing::tiny_config(*data_, dir, 50);
  TrainResult r;
  ASSERT_TRUE(train(c, &r, "", -1, [](int64_t s) { if (s == 3) std::raise(SIGTERM); }).is_ok());
  EXPECT_TRUE(r.stopped_by_signal);
  EXPECT_EQ(r.step, 3);
  CheckpointMeta meta;
  std::string resolved;
  ASSERT_TRUE(resolve_checkpoint(dir, &resolved).is_ok());
  ASSERT_TRUE(read_checkpoint_meta(resolved, &meta).is_ok());
  EXPECT_EQ(meta.step, 3);
  TrainResult r2;
  ASSERT_TRUE(train(c, &r2, "latest", 5).is_ok());
  EXPECT_EQ(r2.step, 5);
}

TEST_F(TrainerTest, StaleTemporaryDirectoryIsIgnored) {
  const std::string dir = scratch("stale");
  TrainConfig c = testing::tiny_config(*data_, dir, 6);
  TrainResult r;
  ASSERT_TRUE(train(c, &r, "", 2).is_ok());
  // What a SIGKILL during the next write leaves: a half-written temporary directory.
  fs::create_directories(dir + "/.tmp-step-000000004-99999");
  std::ofstream(dir + "/.tmp-step-000000004-99999/model.safetensors") << "torn";
  TrainResult r2;
  ASSERT_TRUE(train(c, &r2, "latest", 4).is_ok());
  EXPECT_EQ(r2.step, 4);
  EXPECT_TRUE(fs::exists(dir + "/.tmp-step-000000004-99999"));  // never read, never deleted
}

TEST_F(TrainerTest, CorruptCheckpointIsAClearErrorAndTouchesNothing) {
  const std::string dir = scratch("corrupt");
  TrainConfig c = testing::tiny_config(*data_, dir, 6);
  TrainResult r;
  ASSERT_TRUE(train(c, &r, "", 2).is_ok());
  for (const char* file : {"model.safetensors", "optimizer.state"}) {
    const std::string path = dir + "/step-000000002/" + file;
    std::string bytes = slurp(path);
    bytes[bytes.size() / 2] ^= 0x10;
    { std::ofstream(path, std::ios::binary) << bytes; }
    const auto before = listing(dir);
    Status st = train(c, &r, "latest");
    EXPECT_EQ(st.code(), StatusCode::kCorrupt) << st.to_string();
    EXPECT_NE(st.message().find(file), std::string::npos) << st.message();
    EXPECT_EQ(before, listing(dir));
    bytes[bytes.size() / 2] ^= 0x10;
    { std::ofstream(path, std::ios::binary) << bytes; }
  }
  // An incompatible model is refused by name.
  TrainConfig other = c;
  other.model.hidden = 32;
  Status st = train(other, &r, "latest");
  EXPECT_NE(st.message().find("incompatible checkpoint: model.hidden is 64 in the checkpoint, 32 in the config"),
            std::string::npos)
      << st.to_string();
}

// The optimizer's m and v are flat buffers: a checkpoint whose parameter layout differs from
// the model's (a version-1 checkpoint, written before q/k/v were packed, or another table)
// cannot resume; the error names trainer.json and nothing is touched. Its weights, stored by
// name, still start a phase with fresh moments.
TEST_F(TrainerTest, OptimizerStateOfAnotherParameterLayoutIsRefused) {
  const std::string dir = scratch("layout");
  TrainConfig c = testing::tiny_config(*data_, dir, 4);
  TrainResult r;
  ASSERT_TRUE(train(c, &r, "", 2).is_ok());
  const std::string meta_path = dir + "/step-000000002/trainer.json";
  // The edits below stand for files older builds wrote, before trainer.json carried its own
  // checksum (which any edit would fail): the field is dropped first.
  const std::string original = [&] {
    std::string text = slurp(meta_path);
    const size_t at = text.rfind(",\n  \"checksum\": ");
    EXPECT_NE(at, std::string::npos) << text;
    if (at != std::string::npos) text = text.substr(0, at) + "\n}\n";
    std::ofstream(meta_path, std::ios::binary) << text;
    return text;
  }();
  ASSERT_NE(original.find("\"param_layout\": \"crc32c:"), std::string::npos) << original;
  auto rewrite = [&](const std::string& from, const std::string& to) {
    std::string text = original;
    const size_t at = text.find(from);
    ASSERT_NE(at, std::string::npos) << from;
    text.replace(at, from.size(), to);
    std::ofstream(meta_path, std::ios::binary) << text;
  };
  const size_t at = original.find("\"param_layout\": ");
  const std::string layout_line = original.substr(at, original.find('\n', at) - at + 1);

  // Version 1: no layout recorded.
  rewrite("\"format_version\": 2,\n", "\"format_version\": 1,\n");
  {
    std::string text = slurp(meta_path);
    text.erase(text.find(layout_line), layout_line.size());
    std::ofstream(meta_path, std::ios::binary) << text;
  }
  auto before = listing(dir);
  Status st = train(c, &r, "latest");
  EXPECT_EQ(st.code(), StatusCode::kUnsupported) << st.to_string();
  EXPECT_NE(st.message().find(meta_path), std::string::npos) << st.message();
  EXPECT_NE(st.message().find("predates the packed query/key/value layout"), std::string::npos) << st.message();
  EXPECT_EQ(before, listing(dir));
  // Its weights start a phase with fresh moments; keeping its moments is refused.
  TrainConfig fresh = testing::tiny_config(*data_, scratch("layout-fresh"), 1);
  fresh.phase_start = PhaseStart::kReset;
  EXPECT_TRUE(train(fresh, &r, "", -1, nullptr, dir + "/step-000000002").is_ok());
  TrainConfig keep = testing::tiny_config(*data_, scratch("layout-keep"), 1);
  st = train(keep, &r, "", -1, nullptr, dir + "/step-000000002");
  EXPECT_EQ(st.code(), StatusCode::kUnsupported) << st.to_string();

  // Version 2 with another layout's fingerprint.
  rewrite(layout_line, "\"param_layout\": \"crc32c:00000000/1\",\n");
  before = listing(dir);
  st = train(c, &r, "latest");
  EXPECT_EQ(st.code(), StatusCode::kInvalidArgument) << st.to_string();
  EXPECT_NE(st.message().find("crc32c:00000000/1"), std::string::npos) << st.message();
  EXPECT_EQ(before, listing(dir));

  std::ofstream(meta_path, std::ios::binary) << original;
  ASSERT_TRUE(train(c, &r, "latest").is_ok());
  EXPECT_EQ(r.step, 4);
}

TEST_F(TrainerTest, Phase2InitFromCheckpointAndHuggingFaceExport) {
  const std::string p1 = scratch("phase1"), p2 = scratch("phase2"), hf = scratch("hf") + "/out";
  TrainConfig c1 = testing::tiny_config(*data_, p1, 4);
  TrainResult r;
  ASSERT_TRUE(train(c1, &r).is_ok());
  TrainConfig c2 = testing::tiny_config(*data_, p2, 3);
  c2.schedule.peak_lr = 0.005;
  ASSERT_TRUE(train(c2, &r, "", -1, nullptr, p1 + "/final").is_ok());
  CheckpointMeta meta;
  ASSERT_TRUE(read_checkpoint_meta(p2 + "/step-000000003", &meta).is_ok());
  EXPECT_EQ(meta.optimizer.phase, 1);
  EXPECT_EQ(meta.optimizer.step, 7);  // keep_moments: t continues

  ASSERT_TRUE(export_hf(c2, p2 + "/final", ExportOptions{hf, false, ""}).is_ok());
  for (const char* f : {"model.safetensors", "config.json", "vocab.txt", "tokenizer_config.json"})
    EXPECT_TRUE(fs::exists(hf + "/" + f)) << f;
  EXPECT_FALSE(export_hf(c2, p2 + "/final", ExportOptions{hf, false, ""}).is_ok());  // not empty
  // The export loads as phase-2 weights from a Hugging Face directory.
  TrainConfig c3 = testing::tiny_config(*data_, scratch("from-hf"), 1);
  ASSERT_TRUE(train(c3, &r, "", -1, nullptr, hf).is_ok());

  BertConfig mc;
  ASSERT_TRUE(c2.resolve_model(&mc).is_ok());
  EvalOptions eo = testing::tiny_eval_options(c2, 64);
  EvalResult er;
  ASSERT_TRUE(run_eval(mc, p2 + "/final", eo, &er).is_ok());
  EXPECT_EQ(er.sequences, 64);
  EXPECT_TRUE(std::isfinite(er.mlm_loss) && er.mlm_loss > 0);
}

// The last metrics line's value of `field` (a number), or NaN.
double last_metric(const std::string& path, const std::string& field) {
  std::ifstream f(path);
  std::string line, last;
  while (std::getline(f, line)) last = line;
  const size_t at = last.find("\"" + field + "\":");
  return at == std::string::npos ? std::nan("") : std::atof(last.c_str() + at + field.size() + 3);
}

// A static loss scale of 2^10 multiplies every gradient exactly and the Updater divides it
// out exactly, so the weights are bit-identical to an unscaled run. (Before the trainer
// passed the scale into backward, the Updater divided gradients that were never scaled.)
TEST_F(TrainerTest, StaticLossScaleIsDividedOutExactly) {
  const std::string a = scratch("unscaled"), b = scratch("scaled");
  TrainConfig ca = testing::tiny_config(*data_, a, 6), cb = testing::tiny_config(*data_, b, 6);
  cb.precision.loss_scale = "static";
  cb.precision.scaler.initial_scale = 1024;
  TrainResult ra, rb;
  ASSERT_TRUE(train(ca, &ra).is_ok());
  ASSERT_TRUE(train(cb, &rb).is_ok());
  EXPECT_EQ(last_metric(cb.metrics_path(), "loss_scale"), 1024);
  EXPECT_TRUE(slurp(a + "/final/model.safetensors") == slurp(b + "/final/model.safetensors"))
      << "the weights differ: the scale was not divided out exactly";
}

// bf16 and fp16 GEMM operands (emulated on the CPU exactly as the GPU rounds them) over 40
// updates of the tiny model: the loss falls as in fp32 and ends within 1% of it (measured:
// 2e-6); fp16 runs with the dynamic loss scaler (2^16, no overflow here).
TEST_F(TrainerTest, MixedPrecisionTracksFp32) {
  const int64_t steps = 40;
  TrainConfig c32 = testing::tiny_config(*data_, scratch("fp32"), steps);
  c32.logging.every_steps = 10;
  TrainResult r32;
  ASSERT_TRUE(train(c32, &r32).is_ok());
  for (const char* dtype : {"bf16", "fp16"}) {
    TrainConfig c = c32;
    c.checkpoint.dir = scratch(dtype);
    c.precision.dtype = dtype;
    std::string key;
    ASSERT_TRUE(c.validate(1, &key).is_ok()) << key;
    TrainResult r;
    ASSERT_TRUE(train(c, &r).is_ok()) << dtype;
    const double skipped = last_metric(c.metrics_path(), "skipped");
    std::printf("%s: first window loss %.6f (fp32 %.6f), last %.6f (fp32 %.6f), skipped %.0f, scale %g\n", dtype,
                r.first_loss, r32.first_loss, r.loss, r32.loss, skipped, last_metric(c.metrics_path(), "loss_scale"));
    EXPECT_LT(std::abs(r.loss - r32.loss), 0.01 * r32.loss) << dtype;
    EXPECT_LT(r.loss, r.first_loss - 0.5) << dtype;
    EXPECT_FALSE(slurp(c.checkpoint.dir + "/final/model.safetensors") ==
                 slurp(c32.checkpoint.dir + "/final/model.safetensors"))
        << dtype << ": the weights equal fp32's: the GEMM operands were not rounded";
    if (std::string(dtype) == "fp16") {
      EXPECT_GE(last_metric(c.metrics_path(), "loss_scale"), 1);
      EXPECT_LE(skipped, 8);
    } else {
      EXPECT_EQ(skipped, 0);
    }
  }
}

// A learning rate that blows the weights up makes the last steps' losses NaN (their updates
// skipped, fewer than max_consecutive_skips): the run ends as diverged (exit 7), not "done"
// with a `final` checkpoint of weights that give NaN, and writes no periodic checkpoint of
// them either; the message names the step they came from. A stop before the last step
// (--stop-at-step) still writes its checkpoint, to resume from.
TEST_F(TrainerTest, ARunEndingOnANonFiniteLossHasDiverged) {
  TrainConfig c = testing::tiny_config(*data_, scratch("nan-end"), 4);
  c.schedule.peak_lr = 1e38;
  c.checkpoint.every_steps = 1;
  c.checkpoint.async = true;  // the last background write ends before the error returns
  c.logging.every_steps = 1;
  TrainResult r;
  const Status st = train(c, &r);
  ASSERT_EQ(st.code(), StatusCode::kDiverged) << st.to_string();
  EXPECT_EQ(st.exit_code(), 7);
  const std::string since = "step 4: the loss has not been finite since step ";
  ASSERT_EQ(st.message().rfind(since, 0), 0u) << st.message();
  const int k = std::stoi(st.message().substr(since.size()));
  ASSERT_GE(k, 2);
  ASSERT_LE(k, 4);
  EXPECT_NE(st.message().find("the weights of step " + std::to_string(k - 1) + "'s update give non-finite values"),
            std::string::npos)
      << st.message();
  // The newest checkpoint before those weights is named, or said to be missing.
  char earlier[32];
  std::snprintf(earlier, sizeof earlier, "/step-%09d", k - 2);
  EXPECT_NE(st.message().find(k >= 3 ? "--resume " + c.checkpoint.dir + earlier + ")"
                                     : c.checkpoint.dir + " holds no checkpoint before step " + std::to_string(k - 1)),
            std::string::npos)
      << st.message();
  EXPECT_FALSE(fs::exists(c.checkpoint.dir + "/final"));
  for (int s = 1; s <= 4; ++s) {
    char name[32];
    std::snprintf(name, sizeof name, "/step-%09d", s);
    EXPECT_EQ(fs::exists(c.checkpoint.dir + name), s < k) << name;  // none of the steps that gave NaN
  }
  TrainConfig stopped = c;
  stopped.checkpoint.dir = scratch("nan-stop");
  ASSERT_TRUE(train(stopped, &r, "", /*stop=*/3).is_ok());
  EXPECT_TRUE(fs::exists(stopped.checkpoint.dir + "/step-000000003"));
}

// fp16 started at a loss scale of 2^24: the scaled output gradients exceed fp16's 65504 in
// the GEMM operands, become inf, and the dynamic scaler skips those steps and backs off
// until they fit; training then proceeds as usual.
TEST_F(TrainerTest, Fp16OverflowIsSkippedAndTheScaleBacksOff) {
  TrainConfig c = testing::tiny_config(*data_, scratch("fp16-overflow"), 30);
  c.logging.every_steps = 10;
  c.precision.dtype = "fp16";
  c.precision.scaler.initial_scale = 16777216;  // 2^24
  TrainResult r;
  ASSERT_TRUE(train(c, &r).is_ok());
  const double skipped = last_metric(c.metrics_path(), "skipped"), scale = last_metric(c.metrics_path(), "loss_scale");
  std::printf("skipped %.0f, final scale %g, loss %.4f -> %.4f\n", skipped, scale, r.first_loss, r.loss);
  EXPECT_GT(skipped, 0);
  EXPECT_LT(skipped, 20);
  EXPECT_LT(scale, 16777216);
  EXPECT_LT(r.loss, r.first_loss - 0.3);
}

}  // namespace
}  // namespace lansbert

namespace lansbert {
namespace {

// backend: cuda goes through the DeviceBackend registry; this test binary registers none (as
// a lansbert built without CUDA), so the run is refused with a message saying why and
// nothing is written. TF32 is refused on the CPU backend.
TEST(TrainerDevice, UnregisteredBackendIsAClearError) {
  ASSERT_FALSE(has_device_backend("cuda"));
  const std::string dir = scratch("no-cuda");
  ASSERT_FALSE(testing::write_tiny_shards(dir + "/data").empty());
  TrainConfig c = testing::tiny_config(dir + "/data", dir + "/ckpt", 2);
  c.backend = "cuda";
  std::string key;
  ASSERT_TRUE(c.validate(1, &key).is_ok()) << key;
  TrainResult r;
  Status s = train(c, &r);
  EXPECT_EQ(s.code(), StatusCode::kUnsupported) << s.to_string();
  EXPECT_NE(s.message().find("built without"), std::string::npos) << s.message();
  EXPECT_FALSE(fs::exists(dir + "/ckpt/latest"));
  c.backend = "cpu";
  c.precision.tf32 = true;
  EXPECT_FALSE(c.validate(1, &key).is_ok());
  EXPECT_EQ(key, "precision.tf32");
}

}  // namespace
}  // namespace lansbert
