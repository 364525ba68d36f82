// DirLock: a second process is refused while the first holds the lock, by a message that
// names the holder; the lock goes with its holder (release, or death without a release).
// Record locks never conflict within one process, so the other holder is a forked child.
#include "lansbert/core/dir_lock.h"

#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <csignal>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>

namespace lansbert {
namespace {

namespace fs = std::filesystem;

fs::path fresh_dir(const std::string& name) {
  const fs::path d = fs::temp_directory_path() / ("lansbert_dir_lock_" + name + "_" + std::to_string(::getpid()));
  fs::remove_all(d);
  return d;
}

// A child that takes the lock as "child-holder", tells the parent through a pipe, then
// waits (for a byte, or forever) before it exits.
struct Holder {
  pid_t pid = -1;
  int to_child = -1;

  explicit Holder(const fs::path& dir) {
    int ready[2], go[2];
    if (::pipe(ready) != 0 || ::pipe(go) != 0) std::abort();
    pid = ::fork();
    if (pid == 0) {
      DirLock lock;
      const Status st = lock.acquire(dir.string(), "test.dir", "child-holder");
      const char c = st.is_ok() && lock.held() ? 'y' : 'n';
      if (::write(ready[1], &c, 1) != 1) ::_exit(3);
      char b;
      [[maybe_unused]] ssize_t n = ::read(go[0], &b, 1);
      ::_exit(0);
    }
    ::close(ready[1]);
    ::close(go[0]);
    to_child = go[1];
    char c = 'n';
    EXPECT_EQ(::read(ready[0], &c, 1), 1);
    ::close(ready[0]);
    EXPECT_EQ(c, 'y') << "the child could not take the lock";
  }
  void finish() {
    const char b = 'x';
    EXPECT_EQ(::write(to_child, &b, 1), 1);
    wait_for_exit();
  }
  void kill_hard() {
    ::kill(pid, SIGKILL);
    wait_for_exit();
  }
  void wait_for_exit() {
    int status = 0;
    ::waitpid(pid, &status, 0);
    ::close(to_child);
    pid = -1;
  }
  ~Holder() {
    if (pid > 0) kill_hard();
  }
};

TEST(DirLock, CreatesTheDirectoryAndRecordsTheHolder) {
  const fs::path d = fresh_dir("create") / "nested";
  DirLock lock;
  ASSERT_TRUE(lock.acquire(d.string(), "checkpoint.dir", "me, pid 1").is_ok());
  EXPECT_TRUE(lock.held());
  std::ifstream f(d / DirLock::kFileName);
  std::string line;
  std::getline(f, line);
  EXPECT_EQ(line, "me, pid 1");
  fs::remove_all(d.parent_path());
}

TEST(DirLock, ASecondProcessIsRefusedWithTheHolderNamed) {
  const fs::path d = fresh_dir("refuse");
  Holder child(d);
  DirLock lock;
  const Status st = lock.acquire(d.string(), "checkpoint.dir", "parent");
  ASSERT_FALSE(st.is_ok());
  EXPECT_EQ(st.exit_code(), 2);
  EXPECT_FALSE(lock.held());
  EXPECT_NE(st.message().find("checkpoint.dir " + d.string() + " is in use by another run (child-holder)"),
            std::string::npos)
      << st.message();
  // The refused run did not touch the holder's record.
  std::ifstream f(d / DirLock::kFileName);
  std::string line;
  std::getline(f, line);
  EXPECT_EQ(line, "child-holder");
  child.finish();
  EXPECT_TRUE(lock.acquire(d.string(), "checkpoint.dir", "parent").is_ok()) << "not released when its holder ended";
  fs::remove_all(d);
}

TEST(DirLock, AKilledHolderLeavesNoStaleLock) {
  const fs::path d = fresh_dir("killed");
  Holder child(d);
  child.kill_hard();
  DirLock lock;
  const Status st = lock.acquire(d.string(), "checkpoint.dir", "after the crash");
  EXPECT_TRUE(st.is_ok()) << st.message();
  EXPECT_TRUE(lock.held());
  fs::remove_all(d);
}

TEST(DirLock, ReleaseLetsAnotherProcessIn) {
  const fs::path d = fresh_dir("release");
  DirLock mine;
  ASSERT_TRUE(mine.acquire(d.string(), "checkpoint.dir", "parent").is_ok());
  mine.release();
  EXPECT_FALSE(mine.held());
  Holder child(d);  // its constructor expects the child to get the lock
  child.finish();
  fs::remove_all(d);
}

// A run refused after it took the lock (its checkpoints do not fit, say) leaves the file as
// it found it: the earlier run's record, byte for byte, and no record of its own.
std::string file_text(const fs::path& p) {
  std::ifstream f(p, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(f), {});
}

TEST(DirLock, AbandonPutsTheEarlierRecordBack) {
  const fs::path d = fresh_dir("abandon");
  {
    DirLock first;
    ASSERT_TRUE(first.acquire(d.string(), "checkpoint.dir", "lansbert train, pid 999 on a, since then").is_ok());
  }
  const std::string before = file_text(d / DirLock::kFileName);
  ASSERT_EQ(before, "lansbert train, pid 999 on a, since then\n");
  DirLock refused;
  ASSERT_TRUE(refused.acquire(d.string(), "checkpoint.dir", "pid 12345678").is_ok());
  EXPECT_EQ(file_text(d / DirLock::kFileName), "pid 12345678\n");
  refused.abandon();
  EXPECT_FALSE(refused.held());
  EXPECT_EQ(file_text(d / DirLock::kFileName), before);
  // A lock file that was new (empty) is empty again.
  const fs::path e = fresh_dir("abandon-new");
  DirLock fresh;
  ASSERT_TRUE(fresh.acquire(e.string(), "checkpoint.dir", "pid 1").is_ok());
  fresh.abandon();
  EXPECT_EQ(file_text(e / DirLock::kFileName), "");
  fs::remove_all(d);
  fs::remove_all(e);
}

TEST(DirLock, APathUnderAFileIsAnIoErrorNamingTheField) {
  const fs::path d = fresh_dir("file");
  fs::create_directories(d);
  std::ofstream(d / "plain") << "x";
  DirLock lock;
  const Status st = lock.acquire((d / "plain" / "ckpt").string(), "checkpoint.dir", "me");
  ASSERT_FALSE(st.is_ok());
  EXPECT_EQ(st.exit_code(), 5);
  EXPECT_NE(st.message().find("checkpoint.dir " + (d / "plain" / "ckpt").string()), std::string::npos)
      << st.message();
  fs::remove_all(d);
}

}  // namespace
}  // namespace lansbert
