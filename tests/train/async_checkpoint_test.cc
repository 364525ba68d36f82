// checkpoint.async: rank 0 writes the checkpoints but the last on a thread while training goes
// on. The files are those of the synchronous writer byte for byte (the copies are taken at
// the step boundary, not read from buffers the next steps change), a run resumed from one
// continues as the straight run does, the last checkpoint is on disk when the run returns, and
// the config refuses it with sharded optimizer state.
#include <gtest/gtest.h>
#include <omp.h>

#include <cstdlib>
#include <filesystem>
#include <string>
#include <vector>

#include "lansbert/train/checkpoint.h"
#include "lansbert/train/trainer.h"
#include "train_run_util.h"
#include "train_test_util.h"

namespace lansbert {
namespace {

namespace fs = std::filesystem;
using testing::scratch;
using testing::slurp;
using testing::train;

class AsyncCheckpoint : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    omp_set_num_threads(1);
    data_ = new std::string(scratch("data"));
    ASSERT_FALSE(testing::write_tiny_shards(*data_).empty());
  }
  static void TearDownTestSuite() { delete data_; }
  static std::string* data_;
};
std::string* AsyncCheckpoint::data_ = nullptr;

TEST_F(AsyncCheckpoint, FilesEqualTheSynchronousWritersAndResumeContinuesExactly) {
  const std::string sync_dir = scratch("sync"), async_dir = scratch("async"), resumed_dir = scratch("resumed");
  TrainConfig s = testing::tiny_config(*data_, sync_dir, 9);
  s.checkpoint.every_steps = 2;
  s.checkpoint.keep_last = 10;
  TrainConfig a = s;
  a.checkpoint.dir = async_dir;
  a.checkpoint.async = true;
  TrainResult rs, ra;
  ASSERT_TRUE(train(s, &rs).is_ok());
  ASSERT_TRUE(train(a, &ra).is_ok());
  EXPECT_EQ(ra.checkpoint, checkpoint_step_dir(async_dir, 9));
  for (const int64_t step : {2, 4, 6, 8, 9}) {
    for (const char* f : {checkpoint_file::kModel, checkpoint_file::kOptimizer}) {
      const std::string got = checkpoint_step_dir(async_dir, step) + "/" + f;
      ASSERT_TRUE(fs::exists(got)) << got;
      EXPECT_TRUE(slurp(got) == slurp(checkpoint_step_dir(sync_dir, step) + "/" + f)) << got;
    }
  }
  EXPECT_EQ(fs::read_symlink(async_dir + "/latest").string(), "step-000000009");
  // Resumed from step 4 (written in the background) it ends where both straight runs did.
  TrainConfig r = a;
  r.checkpoint.dir = resumed_dir;
  fs::copy(checkpoint_step_dir(async_dir, 4), checkpoint_step_dir(resumed_dir, 4), fs::copy_options::recursive);
  TrainResult rr;
  ASSERT_TRUE(train(r, &rr, checkpoint_step_dir(resumed_dir, 4)).is_ok());
  EXPECT_TRUE(slurp(checkpoint_step_dir(resumed_dir, 9) + "/" + checkpoint_file::kModel) ==
              slurp(checkpoint_step_dir(sync_dir, 9) + "/" + checkpoint_file::kModel));
  // keep_last counts the checkpoints written in the background as the others.
  TrainConfig k = a;
  k.checkpoint.dir = scratch("keep");
  k.checkpoint.keep_last = 2;
  TrainResult rk;
  ASSERT_TRUE(train(k, &rk).is_ok());
  EXPECT_EQ(checkpoint_step_dirs(k.checkpoint.dir), (std::vector<std::string>{"step-000000008", "step-000000009"}));
}

TEST_F(AsyncCheckpoint, StopAtAStepWritesItsCheckpointBeforeReturning) {
  TrainConfig a = testing::tiny_config(*data_, scratch("stop"), 9);
  a.checkpoint.every_steps = 1;  // every step's in the background, but the one the run stops at
  a.checkpoint.async = true;
  TrainResult r;
  ASSERT_TRUE(train(a, &r, "", 5).is_ok());
  EXPECT_EQ(r.checkpoint, checkpoint_step_dir(a.checkpoint.dir, 5));
  EXPECT_EQ(fs::read_symlink(a.checkpoint.dir + "/latest").string(), "step-000000005");
  CheckpointInventory inv;
  EXPECT_TRUE(verify_whole_checkpoint(r.checkpoint, &inv).is_ok());
}

// The write does run beside the training: with the commit held 2 s before its rename
// (LANSBERT_TEST_CHECKPOINT_SLEEP), the step after a checkpoint trains before it appears.
TEST_F(AsyncCheckpoint, TrainingGoesOnWhileTheCheckpointIsWritten) {
  TrainConfig a = testing::tiny_config(*data_, scratch("beside"), 4);
  a.checkpoint.every_steps = 1;
  a.checkpoint.async = true;
  std::vector<bool> step1_there;
  ::setenv("LANSBERT_TEST_CHECKPOINT_SLEEP", "2", 1);
  TrainResult r;
  const Status st = train(a, &r, "", -1, [&](int64_t step) {
    if (step <= 3) step1_there.push_back(fs::exists(checkpoint_step_dir(a.checkpoint.dir, 1)));
  });
  ::unsetenv("LANSBERT_TEST_CHECKPOINT_SLEEP");
  ASSERT_TRUE(st.is_ok()) << st.to_string();
  // (The hook runs after each update, before that step's checkpoint.) Step 2 trained while
  // step 1's write slept, where a synchronous writer renames it first; step 2's checkpoint
  // waited for it, one write at a time, so step 3 finds it.
  EXPECT_EQ(step1_there, (std::vector<bool>{false, false, true}));
  EXPECT_EQ(r.checkpoint, checkpoint_step_dir(a.checkpoint.dir, 4));
  EXPECT_TRUE(fs::exists(checkpoint_step_dir(a.checkpoint.dir, 4)));
}

TEST_F(AsyncCheckpoint, RefusedWithShardedOptimizerState) {
  TrainConfig a = testing::tiny_config(*data_, scratch("sharded"), 4);
  a.checkpoint.async = true;
  a.distributed.shard_optimizer = true;
  std::string key;
  const Status st = a.validate(1, &key);
  EXPECT_EQ(key, "checkpoint.async") << st.to_string();
  EXPECT_NE(st.message().find("distributed.shard_optimizer: false"), std::string::npos) << st.message();
}

}  // namespace
}  // namespace lansbert
