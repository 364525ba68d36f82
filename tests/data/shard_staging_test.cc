// ShardStaging's cleanup after a run that does not commit: it removes the directories its own
// mkdir made for --out (deepest first, each only if empty) and nothing else: not a parent that
// was there (empty or reached through "missing/.."), not a symbolic link in the way, not a file
// someone put into a directory it made. After a commit everything stays.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "../../src/data/shard_staging.h"
#include "test_util.h"

namespace lansbert {
namespace {

namespace fs = std::filesystem;

TEST(ShardStaging, RemovesOnlyTheDirectoriesItMade) {
  const std::string dir = testing::scratch_dir("shard_staging");
  fs::create_directory(dir + "/empty_parent");
  {
    ShardStaging s;
    ASSERT_TRUE(s.open(dir + "/empty_parent/new/out").is_ok());
    EXPECT_TRUE(fs::is_directory(dir + "/empty_parent/new/out"));
  }
  EXPECT_FALSE(fs::exists(dir + "/empty_parent/new"));
  EXPECT_TRUE(fs::is_directory(dir + "/empty_parent"));  // it was there: not ours, though empty

  {  // a file put into a directory it made stays, and so does that directory
    ShardStaging s;
    ASSERT_TRUE(s.open(dir + "/made/a/out/").is_ok());
    std::ofstream(dir + "/made/a/note.txt") << "mine";
  }
  EXPECT_FALSE(fs::exists(dir + "/made/a/out"));
  EXPECT_TRUE(fs::exists(dir + "/made/a/note.txt"));

  fs::create_directory(dir + "/keep_empty");
  {  // an existing directory reached through a missing one and ".."
    ShardStaging s;
    ASSERT_TRUE(s.open(dir + "/nope/../keep_empty/new").is_ok());
  }
  EXPECT_TRUE(fs::is_directory(dir + "/keep_empty"));
  EXPECT_FALSE(fs::exists(dir + "/keep_empty/new"));
  EXPECT_FALSE(fs::exists(dir + "/nope"));  // that one it made

  fs::create_symlink(dir + "/target-not-yet-made", dir + "/dangling");
  {
    ShardStaging s;
    const Status st = s.open(dir + "/dangling/sub");
    EXPECT_FALSE(st.is_ok());
    EXPECT_NE(st.message().find("dangling"), std::string::npos) << st.to_string();
  }
  EXPECT_TRUE(fs::is_symlink(dir + "/dangling"));  // the user's link stays
  {
    ShardStaging s;
    const Status st = s.open(dir + "/dangling", "--heldout-out");
    EXPECT_NE(st.message().find("--heldout-out " + dir + "/dangling: cannot create the directory " + dir +
                                "/dangling: a symbolic link to nothing is in the way"),
              std::string::npos)
        << st.to_string();
  }
  std::ofstream(dir + "/a-file") << "x";
  {  // a file where a directory should be; nothing made before it is left
    ShardStaging s;
    const Status st = s.open(dir + "/fresh/../a-file/sub");
    EXPECT_NE(st.message().find("cannot create the directory " + dir + "/fresh/../a-file: it is not a directory"),
              std::string::npos)
        << st.to_string();
  }
  EXPECT_FALSE(fs::exists(dir + "/fresh"));

  {  // refused the lock: what the holder uses stays; a level made beside it does not
    ShardStaging holder, second;
    ASSERT_TRUE(holder.open(dir + "/held/out").is_ok());
    const Status st = second.open(dir + "/held/beside/../out");
    EXPECT_EQ(st.code(), StatusCode::kInvalidArgument) << st.to_string();
    EXPECT_NE(st.message().find("--out " + dir + "/held/beside/../out: another lansbert prep"), std::string::npos)
        << st.to_string();
    EXPECT_TRUE(fs::is_directory(dir + "/held/beside"));  // until `second` goes
  }
  EXPECT_FALSE(fs::exists(dir + "/held"));  // the holder never committed: all its own went
  {
    ShardStaging holder;
    ASSERT_TRUE(holder.open(dir + "/held2/out").is_ok());
    {
      ShardStaging second;
      EXPECT_FALSE(second.open(dir + "/held2/beside/../out").is_ok());
    }
    EXPECT_FALSE(fs::exists(dir + "/held2/beside"));
    EXPECT_TRUE(fs::is_directory(dir + "/held2/out"));
  }
  fs::create_symlink("loop", dir + "/loop");
  {
    ShardStaging s;
    const Status st = s.open(dir + "/loop/x");
    EXPECT_NE(st.message().find("a symbolic link is in the way: Too many levels of symbolic links"), std::string::npos)
        << st.to_string();
  }
  {  // a committed run keeps what it made
    ShardStaging s;
    ASSERT_TRUE(s.open(dir + "/kept/out").is_ok());
    std::ofstream(s.dir() + "/shard-00000.lbs") << "x";
    ASSERT_TRUE(s.commit(1).is_ok());
  }
  EXPECT_TRUE(fs::exists(dir + "/kept/out/shard-00000.lbs"));
}

}  // namespace
}  // namespace lansbert
