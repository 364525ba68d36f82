// Updater: a skipped overflow step changes nothing but the skip count and the scale; saved
// and restored state gives a bit-identical next step; phase starts keep or reset moments;
// results do not depend on the OpenMP thread count.
#include "lansbert/optim/updater.h"

#include <gtest/gtest.h>
#include <omp.h>
#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <limits>

#include "optim_test_util.h"

namespace lansbert {
namespace {

using testing::Flat;

// Blocks large enough to span several chunks (16384 elements), with odd sizes.
ParamTable big_table() {
  ParamTable t;
  t.add("emb", {300, 129}, ParamRole::kEmbedding);
  t.add("w", {200, 101}, ParamRole::kWeight);
  t.add("b", {101}, ParamRole::kBias);
  t.add("ln.g", {129}, ParamRole::kLayerNormGamma);
  t.add("ln.b", {129}, ParamRole::kLayerNormBeta);
  return t;
}

void fill(const ParamTable& t, std::vector<float>* buf, uint64_t seed, double scale) {
  testing::Lcg r(seed);
  for (const ParamEntry& e : t.entries())
    for (size_t i = 0; i < e.numel; ++i)
      (*buf)[e.offset + i] = static_cast<float>(scale * r.next());
}

UpdaterConfig config(const std::string& name, LossScaleMode mode) {
  UpdaterConfig c;
  c.optimizer.name = name;
  c.schedule.total_steps = 20;
  c.schedule.peak_lr = 0.01;
  c.loss_scale.mode = mode;
  c.loss_scale.initial_scale = 1024;
  return c;
}

std::unique_ptr<Updater> updater(const UpdaterConfig& c) {
  std::unique_ptr<Updater> u;
  Status s = Updater::create(c, &u);
  EXPECT_TRUE(s.is_ok()) << s.to_string();
  return u;
}

// Fills grads for step k as the backward pass would: true gradient times the loss scale.
void backward(const ParamTable& t, Flat* f, int k, double loss_scale) {
  fill(t, &f->g, 100 + k, 0.1 * loss_scale);
}

TEST(Updater, SkippedOverflowChangesNothing) {
  const ParamTable t = big_table();
  Flat f(t);
  fill(t, &f.p, 1, 0.5);
  auto u = updater(config("lans", LossScaleMode::kDynamic));
  StepReport r;
  for (int k = 0; k < 3; ++k) {
    backward(t, &f, k, u->loss_scale());
    ASSERT_TRUE(u->step(t, f.buffers(), &r).is_ok());
  }
  const std::vector<float> p = f.p, m = f.m, v = f.v;
  const OptimizerState before = u->state();
  backward(t, &f, 3, u->loss_scale());
  f.g[t[1].offset + 17] = std::numeric_limits<float>::infinity();
  ASSERT_TRUE(u->step(t, f.buffers(), &r).is_ok());
  EXPECT_TRUE(r.skipped);
  EXPECT_EQ(r.check.nonfinite_blocks, std::vector<size_t>{1});
  EXPECT_EQ(std::memcmp(p.data(), f.p.data(), p.size() * 4), 0);
  EXPECT_EQ(std::memcmp(m.data(), f.m.data(), m.size() * 4), 0);
  EXPECT_EQ(std::memcmp(v.data(), f.v.data(), v.size() * 4), 0);
  const OptimizerState after = u->state();
  EXPECT_EQ(after.step, before.step);
  EXPECT_EQ(after.schedule_step, before.schedule_step);
  EXPECT_EQ(after.skipped_steps, before.skipped_steps + 1);
  EXPECT_EQ(after.consecutive_skips, 1);
  // Default hysteresis 2: the first overflow keeps the scale, the second halves it.
  EXPECT_EQ(u->loss_scale(), 1024);
  backward(t, &f, 3, u->loss_scale());
  ASSERT_TRUE(u->step(t, f.buffers(), &r).is_ok());
  EXPECT_FALSE(r.skipped);
  EXPECT_DOUBLE_EQ(r.lr, u->schedule().lr(3));  // the schedule did not move on the skip
  EXPECT_EQ(u->state().consecutive_skips, 0);
}

// Runs 3 steps, saves, runs step 4; a fresh updater loaded from the save then runs step 4
// from the saved parameters: the parameters and moments must be bit-identical.
TEST(Updater, SaveRestoreGivesBitIdenticalNextStep) {
  const std::string path =
      (std::filesystem::temp_directory_path() / ("lb_optim_state_" + std::to_string(::getpid())))
          .string();
  for (const std::string& name : optimizer_names()) {
    const ParamTable t = big_table();
    Flat f(t);
    fill(t, &f.p, 1, 0.5);
    auto a = updater(config(name, LossScaleMode::kDynamic));
    for (int k = 0; k < 3; ++k) {
      backward(t, &f, k, a->loss_scale());
      ASSERT_TRUE(a->step(t, f.buffers(), nullptr).is_ok());
    }
    ASSERT_TRUE(save_state(path, a->state(), f.m.data(), f.v.data(), t.total_elements()).is_ok());
    Flat g(t);
    g.p = f.p;  // the trainer saves parameters separately
    backward(t, &f, 3, a->loss_scale());
    ASSERT_TRUE(a->step(t, f.buffers(), nullptr).is_ok());

    auto b = updater(config(name, LossScaleMode::kDynamic));
    OptimizerState s;
    ASSERT_TRUE(load_state(path, &s, g.m.data(), g.v.data(), t.total_elements()).is_ok());
    ASSERT_TRUE(b->set_state(s).is_ok());
    EXPECT_EQ(b->loss_scale(), a->loss_scale());
    backward(t, &g, 3, b->loss_scale());
    ASSERT_TRUE(b->step(t, g.buffers(), nullptr).is_ok());
    EXPECT_EQ(std::memcmp(f.p.data(), g.p.data(), f.p.size() * 4), 0) << name;
    EXPECT_EQ(std::memcmp(f.m.data(), g.m.data(), f.m.size() * 4), 0) << name;
    EXPECT_EQ(std::memcmp(f.v.data(), g.v.data(), f.v.size() * 4), 0) << name;
    EXPECT_EQ(state_to_json(a->state()), state_to_json(b->state())) << name;
  }
  std::remove(path.c_str());
}

TEST(Updater, StateFileRejectsCorruptionAndMismatch) {
  const std::string path =
      (std::filesystem::temp_directory_path() / ("lb_optim_bad_" + std::to_string(::getpid())))
          .string();
  std::vector<float> m(1000, 0.5f), v(1000, 0.25f);
  OptimizerState s;
  s.step = 7;
  s.scaler.scale = 3.0517578125e-05;
  ASSERT_TRUE(save_state(path, s, m.data(), v.data(), 1000).is_ok());
  OptimizerState r;
  ASSERT_TRUE(load_state(path, &r, m.data(), v.data(), 1000).is_ok());
  EXPECT_EQ(r.step, 7);
  EXPECT_EQ(r.scaler.scale, s.scaler.scale);
  EXPECT_EQ(load_state(path, &r, m.data(), v.data(), 999).code(), StatusCode::kCorrupt);
  {
    std::fstream io(path, std::ios::in | std::ios::out | std::ios::binary);
    io.seekp(400);
    io.put('\x7f');
  }
  Status bad = load_state(path, &r, m.data(), v.data(), 1000);
  EXPECT_EQ(bad.code(), StatusCode::kCorrupt);
  EXPECT_NE(bad.message().find("checksum"), std::string::npos) << bad.message();
  std::remove(path.c_str());
  auto u = updater(config("lamb", LossScaleMode::kNone));
  const Status other = u->set_state(s, "the caller's hint");  // state written by lans
  EXPECT_EQ(other.code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(other.message(), "the checkpoint's run used optimizer.name lans, this run uses lamb: the caller's hint");
}

// A damaged or hand-edited state is refused naming the field, before any update uses it.
TEST(Updater, ImpossibleStateValuesAreNamed) {
  auto u = updater(config("lans", LossScaleMode::kDynamic));
  OptimizerState good = u->state();
  good.step = 5;
  good.skipped_steps = 2;
  good.consecutive_skips = 1;
  ASSERT_TRUE(u->set_state(good).is_ok());
  const struct {
    void (*edit)(OptimizerState*);
    const char* says;
  } cases[] = {
      {[](OptimizerState* s) { s->step = -1; }, "step -1 is negative"},
      {[](OptimizerState* s) { s->schedule_step = -3; }, "schedule_step -3 is negative"},
      {[](OptimizerState* s) { s->phase = -1; }, "phase -1 is negative"},
      {[](OptimizerState* s) { s->scaler.hysteresis_left = -2; }, "scaler_hysteresis_left -2 is negative"},
      {[](OptimizerState* s) { s->scaler.growth_tracker = -1; }, "scaler_growth_tracker -1 is negative"},
      {[](OptimizerState* s) { s->scaler.scale = -4; }, "loss_scale -4.000000 is not a positive finite"},
      {[](OptimizerState* s) { s->scaler.scale = INFINITY; }, "loss_scale inf is not a positive finite"},
      {[](OptimizerState* s) { s->scaler.scale = NAN; }, "loss_scale nan is not a positive finite"},
      {[](OptimizerState* s) { s->consecutive_skips = 3; }, "consecutive_skips 3 exceeds skipped_steps 2"},
  };
  for (const auto& c : cases) {
    OptimizerState bad = good;
    c.edit(&bad);
    const Status st = u->set_state(bad);
    EXPECT_EQ(st.code(), StatusCode::kCorrupt) << c.says;
    EXPECT_NE(st.message().find(std::string("optimizer state: ") + c.says), std::string::npos) << st.message();
  }
  EXPECT_EQ(u->state().step, 5);  // a refused state leaves the updater as it was
}

// Version 1 files (checkpoints written before the CRC32C) end with an FNV-1a 64 and are still
// read; written here byte by byte as that version's writer did, the checksum computed apart.
TEST(Updater, StateFileVersion1IsStillRead) {
  const std::string path =
      (std::filesystem::temp_directory_path() / ("lb_optim_v1_" + std::to_string(::getpid()))).string();
  OptimizerState s;
  s.optimizer = "lans";
  s.step = 11;
  const std::string json = state_to_json(s);
  std::vector<float> m = {1.5f, -2.0f, 3.25f}, v = {0.5f, 0.25f, 0.125f};
  std::string bytes("LBOPTST\0", 8);
  auto put = [&](const void* p, size_t n) { bytes.append(static_cast<const char*>(p), n); };
  const uint32_t version = 1, json_len = uint32_t(json.size());
  const uint64_t n = m.size();
  put(&version, 4);
  put(&json_len, 4);
  put(json.data(), json.size());
  put(&n, 8);
  put(m.data(), 12);
  put(v.data(), 12);
  uint64_t fnv = 1469598103934665603ull;
  for (unsigned char c : bytes) fnv = (fnv ^ c) * 1099511628211ull;
  put(&fnv, 8);
  std::ofstream(path, std::ios::binary) << bytes;
  OptimizerState r;
  std::vector<float> rm(3), rv(3);
  ASSERT_TRUE(load_state(path, &r, rm.data(), rv.data(), 3).is_ok());
  EXPECT_EQ(r.step, 11);
  EXPECT_EQ(rm, m);
  EXPECT_EQ(rv, v);
  bytes[bytes.size() - 20] ^= 0x10;  // a byte of v
  std::ofstream(path, std::ios::binary | std::ios::trunc) << bytes;
  const Status bad = load_state(path, &r, rm.data(), rv.data(), 3);
  EXPECT_NE(bad.message().find("checksum mismatch"), std::string::npos) << bad.to_string();
  // What this build writes is version 2, 4 bytes shorter (a CRC32C instead of the FNV).
  ASSERT_TRUE(save_state(path, s, m.data(), v.data(), 3).is_ok());
  EXPECT_EQ(std::filesystem::file_size(path), bytes.size() - 4);
  std::ifstream written(path, std::ios::binary);
  bytes = std::string(std::istreambuf_iterator<char>(written), {});
  EXPECT_EQ(bytes[8], 2);
  std::remove(path.c_str());
}

TEST(Updater, PhaseStartKeepsOrResetsMoments) {
  for (PhaseStart mode : {PhaseStart::kKeepMoments, PhaseStart::kReset}) {
    const ParamTable t = big_table();
    Flat f(t);
    fill(t, &f.p, 1, 0.5);
    UpdaterConfig c = config("lans", LossScaleMode::kNone);
    c.phase_start = mode;
    auto u = updater(c);
    for (int k = 0; k < 4; ++k) {
      backward(t, &f, k, 1.0);
      ASSERT_TRUE(u->step(t, f.buffers(), nullptr).is_ok());
    }
    const std::vector<float> m = f.m;
    ScheduleConfig phase2 = c.schedule;
    phase2.peak_lr = 0.004;
    ASSERT_TRUE(u->begin_phase(phase2, f.buffers(), t.total_elements()).is_ok());
    const OptimizerState s = u->state();
    EXPECT_EQ(s.schedule_step, 0);
    EXPECT_EQ(s.phase, 1);
    EXPECT_EQ(s.phase_start, phase_start_name(mode));
    if (mode == PhaseStart::kKeepMoments) {
      EXPECT_EQ(s.step, 4);
      EXPECT_EQ(std::memcmp(m.data(), f.m.data(), m.size() * 4), 0);
    } else {
      EXPECT_EQ(s.step, 0);
      for (float x : f.m) ASSERT_EQ(x, 0.f);
      for (float x : f.v) ASSERT_EQ(x, 0.f);
    }
    EXPECT_EQ(u->schedule().config().peak_lr, 0.004);
  }
}

// The same four updates with 1 and with 2 OpenMP threads give the same bits.
TEST(Updater, ThreadCountIndependent) {
  const int saved = omp_get_max_threads();
  for (const std::string& name : optimizer_names()) {
    std::vector<std::vector<float>> out;
    for (int threads : {1, 2, 3}) {
      omp_set_num_threads(threads);
      const ParamTable t = big_table();
      Flat f(t);
      fill(t, &f.p, 1, 0.5);
      auto u = updater(config(name, LossScaleMode::kDynamic));
      for (int k = 0; k < 4; ++k) {
        backward(t, &f, k, u->loss_scale());
        ASSERT_TRUE(u->step(t, f.buffers(), nullptr).is_ok());
      }
      out.push_back(f.p);
      out.back().insert(out.back().end(), f.m.begin(), f.m.end());
    }
    for (size_t i = 1; i < out.size(); ++i)
      EXPECT_EQ(std::memcmp(out[0].data(), out[i].data(), out[0].size() * 4), 0) << name;
  }
  omp_set_num_threads(saved);
}

}  // namespace
}  // namespace lansbert

namespace lansbert {
namespace {

// The device hooks (backend: cuda) stand in for the Updater's own host passes: with hooks
// that do the host work (a second LossScaler at the same scale, std::fill) and a host
// optimizer, the updates, the skip on inf and the phase reset are exactly those of the
// plain Updater, and both hooks are actually called.
TEST(Updater, DeviceHooksReplaceTheHostPasses) {
  const ParamTable t = big_table();
  Flat a(t), b(t);
  fill(t, &a.p, 1, 0.5);
  fill(t, &b.p, 1, 0.5);
  UpdaterConfig c = config("lans", LossScaleMode::kDynamic);
  c.phase_start = PhaseStart::kReset;
  auto plain = updater(c);
  int checks = 0, zeros = 0;
  UpdaterDeviceHooks hooks;
  hooks.unscale_and_check = [&](const ParamTable& table, float* grads, double scale, size_t begin, size_t end) {
    ++checks;
    EXPECT_EQ(begin, 0u);  // unsharded: the whole buffer
    EXPECT_GE(end, table.total_elements());
    LossScalerConfig sc = c.loss_scale;
    sc.initial_scale = scale;
    LossScaler s(sc);
    return s.unscale_and_check(table, grads, begin, end);
  };
  hooks.zero = [&](float* p, size_t n) {
    ++zeros;
    std::fill(p, p + n, 0.0f);
  };
  std::unique_ptr<Optimizer> opt;
  ASSERT_TRUE(make_optimizer("lans", c.optimizer, &opt).is_ok());
  std::unique_ptr<Updater> hooked;
  ASSERT_TRUE(Updater::create(c, std::move(opt), hooks, &hooked).is_ok());
  for (int k = 0; k < 5; ++k) {
    backward(t, &a, k, plain->loss_scale());
    backward(t, &b, k, hooked->loss_scale());
    if (k == 2) a.g[t[1].offset + 3] = b.g[t[1].offset + 3] = std::numeric_limits<float>::quiet_NaN();
    StepReport ra, rb;
    ASSERT_TRUE(plain->step(t, a.buffers(), &ra).is_ok());
    ASSERT_TRUE(hooked->step(t, b.buffers(), &rb).is_ok());
    EXPECT_EQ(ra.skipped, rb.skipped);
    EXPECT_EQ(ra.check.nonfinite_blocks, rb.check.nonfinite_blocks);
  }
  EXPECT_EQ(checks, 5);
  EXPECT_EQ(std::memcmp(a.p.data(), b.p.data(), a.p.size() * 4), 0);
  EXPECT_EQ(std::memcmp(a.m.data(), b.m.data(), a.m.size() * 4), 0);
  EXPECT_EQ(plain->state().skipped_steps, 1);
  EXPECT_EQ(hooked->state().skipped_steps, 1);
  ASSERT_TRUE(hooked->begin_phase(c.schedule, b.buffers(), t.total_elements()).is_ok());
  EXPECT_EQ(zeros, 2);
  for (float x : b.m) ASSERT_EQ(x, 0.f);
  // Missing hooks or a mismatched optimizer name are refused.
  std::unique_ptr<Optimizer> lamb;
  ASSERT_TRUE(make_optimizer("lamb", c.optimizer, &lamb).is_ok());
  EXPECT_FALSE(Updater::create(c, std::move(lamb), hooks, &hooked).is_ok());
  ASSERT_TRUE(make_optimizer("lans", c.optimizer, &opt).is_ok());
  EXPECT_FALSE(Updater::create(c, std::move(opt), UpdaterDeviceHooks{}, &hooked).is_ok());
}

// Sharded: the device hook is asked for this rank's slice only, as the host check reads it,
// so a non-finite value outside the slice (another rank's, unreduced here) neither skips the
// step nor is counted or unscaled.
TEST(Updater, ShardedDeviceHookChecksTheSliceOnly) {
  const ParamTable t = big_table();
  Flat f(t);
  fill(t, &f.p, 1, 0.5);
  UpdaterConfig c = config("lamb", LossScaleMode::kDynamic);
  size_t seen_begin = 0, seen_end = 0;
  UpdaterDeviceHooks hooks;
  hooks.unscale_and_check = [&](const ParamTable& table, float* grads, double scale, size_t begin, size_t end) {
    seen_begin = begin;
    seen_end = end;
    LossScalerConfig sc = c.loss_scale;
    sc.initial_scale = scale;
    LossScaler s(sc);
    return s.unscale_and_check(table, grads, begin, end);
  };
  hooks.zero = [](float* p, size_t n) { std::fill(p, p + n, 0.0f); };
  std::unique_ptr<Optimizer> opt;
  ASSERT_TRUE(make_optimizer("lamb", c.optimizer, &opt).is_ok());
  std::unique_ptr<Updater> u;
  ASSERT_TRUE(Updater::create(c, std::move(opt), hooks, &u).is_ok());
  ShardSpec shard;
  shard.begin = t[1].offset + 1000;  // inside "w"
  shard.end = t[2].offset + 50;      // inside "b"
  shard.reduce_sums = [](double*, size_t) {};  // one rank standing in for several
  u->set_shard(shard);
  backward(t, &f, 0, u->loss_scale());
  const float outside = std::numeric_limits<float>::infinity();
  f.g[t[0].offset + 7] = outside;
  StepReport r;
  ASSERT_TRUE(u->step(t, f.buffers(), &r).is_ok());
  EXPECT_EQ(seen_begin, shard.begin);
  EXPECT_EQ(seen_end, shard.end);
  EXPECT_FALSE(r.skipped);
  EXPECT_EQ(r.check.nonfinite_values, 0u);
  EXPECT_EQ(f.g[t[0].offset + 7], outside);
  // Inside the slice it counts.
  backward(t, &f, 1, u->loss_scale());
  f.g[t[1].offset + 2000] = std::numeric_limits<float>::quiet_NaN();
  ASSERT_TRUE(u->step(t, f.buffers(), &r).is_ok());
  EXPECT_TRUE(r.skipped);
  EXPECT_EQ(r.check.nonfinite_values, 1u);
}

}  // namespace
}  // namespace lansbert
