// Which checkpoint files a reader checks and reads: read_checkpoint_meta reads trainer.json
// alone; each other file is checked on the one read that loads it, and a rank of a sharded
// resume touches only the slices its range overlaps, so a damaged slice of another rank is not
// its error. The digests are taken as the files are written. verify_whole_checkpoint (lansbert
// verify) checks every file.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <functional>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>
#include <nlohmann/json.hpp>

#include "lansbert/model/bert_config.h"
#include "lansbert/train/checkpoint.h"

namespace lansbert {
namespace {

namespace fs = std::filesystem;

constexpr int kRanks = 3;

struct Fixture {
  fs::path root;
  ParamTable table;
  std::vector<float> params, m, v;
  std::vector<OptimizerSlice> slices;  // the sharded layout's, when written sharded
  std::string dir;                     // the checkpoint's directory
};

CheckpointMeta test_meta(int64_t step) {
  CheckpointMeta meta;
  meta.step = step;
  meta.config_json = R"({"model": {}, "batch": {}})";
  meta.optimizer.step = step;
  meta.optimizer.schedule_step = step;
  return meta;
}

// Writes a checkpoint of a three-tensor table (params[i] = i / 4, m[i] = i, v[i] = -i),
// replicated or sharded over kRanks slices as the trainer's ranks would.
Fixture write_fixture(const std::string& name, bool sharded) {
  Fixture f;
  f.root = fs::temp_directory_path() / ("lansbert_ckpt_files_" + name + "_" + std::to_string(::getpid()));
  fs::remove_all(f.root);
  f.table.add("a.weight", {4, 8}, ParamRole::kWeight);
  f.table.add("b.weight", {8, 8}, ParamRole::kWeight);
  f.table.add("c.bias", {8}, ParamRole::kBias);
  const size_t n = f.table.total_elements();
  f.params.resize(n);
  f.m.resize(n);
  f.v.resize(n);
  for (size_t i = 0; i < n; ++i) f.m[i] = float(i), f.v[i] = -float(i), f.params[i] = 0.25f * float(i);
  const CheckpointMeta meta = test_meta(7);
  if (!sharded) {
    EXPECT_TRUE(write_checkpoint(f.root.string(), meta, f.table, f.params.data(), f.m.data(), f.v.data(), 2, false,
                                 &f.dir).is_ok());
    return f;
  }
  const std::string tmp = checkpoint_tmp_dir(f.root.string(), meta.step, ::getpid());
  EXPECT_TRUE(create_checkpoint_tmp(f.root.string(), tmp).is_ok());
  for (int r = 0; r < kRanks; ++r) {
    const size_t begin = n * r / kRanks, end = n * (r + 1) / kRanks;
    OptimizerSlice s;
    EXPECT_TRUE(write_optimizer_slice(tmp, r, meta.optimizer, f.m.data() + begin, f.v.data() + begin, begin, end, &s)
                    .is_ok());
    f.slices.push_back(s);
  }
  EXPECT_TRUE(commit_sharded_checkpoint(f.root.string(), tmp, meta, f.table, f.params.data(), f.slices, 2, false,
                                        &f.dir).is_ok());
  return f;
}

void flip_a_byte(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::string bytes((std::istreambuf_iterator<char>(in)), {});
  in.close();
  ASSERT_FALSE(bytes.empty()) << path;
  bytes[bytes.size() - 1] ^= 0x01;  // inside the data, past every header
  std::ofstream(path, std::ios::binary | std::ios::trunc) << bytes;
}

// Loads [begin, end) of the moments; on success checks them against m[i] = i, v[i] = -i.
Status load_range(const Fixture& f, const CheckpointMeta& meta, size_t begin, size_t end) {
  std::vector<float> m(end - begin, 99.f), v(end - begin, 99.f);
  OptimizerState state;
  const Status st =
      load_checkpoint_optimizer_range(f.dir, meta, f.table.total_elements(), begin, end, &state, m.data(), v.data());
  if (!st.is_ok()) return st;
  EXPECT_EQ(state.step, 7);
  for (size_t i = begin; i < end; ++i) {
    EXPECT_EQ(m[i - begin], float(i));
    EXPECT_EQ(v[i - begin], -float(i));
  }
  return st;
}

// A checkpoint whose `latest` cannot be moved to it is not written: its directory is moved
// back and removed, so `latest` is still the newest step and --resume latest still runs
// (a step past `latest` would make check_checkpoint_root refuse it).
TEST(CheckpointFiles, ACheckpointLatestCannotPointToIsNotLeftBehind) {
  Fixture f = write_fixture("latest_fails", false);
  const std::string root = f.root.string();
  // point() makes its link under this name first: a non-empty directory there stops it.
  const fs::path blocker = f.root / (".latest.tmp-" + std::to_string(::getpid()));
  fs::create_directories(blocker / "in-the-way");
  std::string dir;
  const Status st = write_checkpoint(root, test_meta(9), f.table, f.params.data(), f.m.data(), f.v.data(), 2, false,
                                     &dir);
  ASSERT_EQ(st.code(), StatusCode::kIoError);
  EXPECT_NE(st.message().find(blocker.string()), std::string::npos) << st.message();
  EXPECT_FALSE(fs::exists(f.root / "step-000000009"));
  EXPECT_EQ(fs::read_symlink(f.root / "latest"), "step-000000007");
  for (const auto& e : fs::directory_iterator(f.root))
    EXPECT_EQ(e.path().filename().string().find(".tmp-step"), std::string::npos) << e.path();
  EXPECT_TRUE(check_checkpoint_root(root, 7).is_ok());
  fs::remove_all(blocker);
  // A step directory past `latest` (a run killed between its rename and `latest`): the refusal
  // names the way to continue from it.
  ASSERT_TRUE(write_checkpoint(root, test_meta(9), f.table, f.params.data(), f.m.data(), f.v.data(), 2, false, &dir)
                  .is_ok());
  fs::remove(f.root / "latest");
  fs::create_directory_symlink("step-000000007", f.root / "latest");
  const Status refused = check_checkpoint_root(root, 7);
  ASSERT_EQ(refused.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(refused.message().find("--resume " + (f.root / "step-000000009").string() + " continues from there"),
            std::string::npos) << refused.message();
  fs::remove_all(f.root);
}

TEST(CheckpointFiles, ADamagedSliceIsAnErrorOnlyForTheRanksThatReadIt) {
  const Fixture f = write_fixture("slice", true);
  ASSERT_EQ(f.slices.size(), size_t(kRanks));
  const std::string damaged = f.dir + "/" + f.slices[2].file;
  flip_a_byte(damaged);
  CheckpointMeta meta;
  ASSERT_TRUE(read_checkpoint_meta(f.dir, &meta).is_ok());  // the weights are whole
  // A rank whose range lies in slices 0 and 1 loads them and never opens slice 2.
  EXPECT_TRUE(load_range(f, meta, f.slices[0].begin + 1, f.slices[1].end).is_ok());
  // A range of no elements reads the scalars from the first slice.
  EXPECT_TRUE(load_range(f, meta, f.slices[1].end, f.slices[1].end).is_ok());
  // Any range that overlaps slice 2 (on this rank count or another) names the file.
  for (size_t begin : {f.slices[2].begin, f.slices[1].end - 1, size_t(0)}) {
    const Status st = load_range(f, meta, begin, f.slices[2].end);
    EXPECT_EQ(st.code(), StatusCode::kCorrupt) << st.to_string();
    EXPECT_NE(st.message().find(damaged + ": size or CRC32C differs"), std::string::npos) << st.message();
  }
  // A missing slice is "not found" for the ranks that need it, and nobody else's concern.
  fs::remove(f.dir + "/" + f.slices[0].file);
  EXPECT_TRUE(load_range(f, meta, f.slices[1].begin, f.slices[1].end).is_ok());
  const Status st = load_range(f, meta, 0, 1);
  EXPECT_EQ(st.code(), StatusCode::kNotFound) << st.to_string();
  EXPECT_NE(st.message().find(f.slices[0].file), std::string::npos) << st.message();
  fs::remove_all(f.root);
}

TEST(CheckpointFiles, TheManifestIsCheckedBeforeItChoosesTheSlices) {
  const Fixture f = write_fixture("manifest", true);
  const std::string manifest = f.dir + "/" + checkpoint_file::kManifest;
  std::ifstream in(manifest);
  std::string text((std::istreambuf_iterator<char>(in)), {});
  in.close();
  // Same length, other ranges: a manifest that passed unchecked would cut the moments wrong.
  const size_t at = text.find("\"end\": " + std::to_string(f.slices[0].end));
  ASSERT_NE(at, std::string::npos) << text;
  text[at + 7] = text[at + 7] == '1' ? '2' : '1';
  std::ofstream(manifest, std::ios::trunc) << text;
  CheckpointMeta meta;
  ASSERT_TRUE(read_checkpoint_meta(f.dir, &meta).is_ok());
  const Status st = load_range(f, meta, 0, 1);
  EXPECT_EQ(st.code(), StatusCode::kCorrupt) << st.to_string();
  EXPECT_NE(st.message().find(manifest + ": size or CRC32C differs"), std::string::npos) << st.message();
  fs::remove_all(f.root);
}

// Loads the weights; on success checks them against the fixture's.
Status load_weights(const Fixture& f, const CheckpointMeta& meta) {
  std::vector<float> p(f.table.total_elements(), 99.f);
  const Status st = load_checkpoint_params(f.dir, meta, f.table, p.data());
  if (!st.is_ok()) return st;
  for (const ParamEntry& e : f.table.entries())  // by tensor: the padding between them is not stored
    for (size_t i = 0; i < size_t(e.numel); ++i) EXPECT_EQ(p[e.offset + i], f.params[e.offset + i]) << e.name << " " << i;
  return st;
}

// Overwrites byte `at` of `path` (from the end when negative) with its complement.
void damage_byte(const std::string& path, long at) {
  std::fstream io(path, std::ios::binary | std::ios::in | std::ios::out);
  io.seekg(at, at < 0 ? std::ios::end : std::ios::beg);
  const char c = char(io.get());
  io.seekp(at, at < 0 ? std::ios::end : std::ios::beg);
  io.put(char(~c));
}

TEST(CheckpointFiles, EachFileIsCheckedOnTheReadThatLoadsIt) {
  Fixture f = write_fixture("replicated", false);
  const size_t n = f.table.total_elements();
  CheckpointMeta meta;
  ASSERT_TRUE(read_checkpoint_meta(f.dir, &meta).is_ok());
  EXPECT_TRUE(load_weights(f, meta).is_ok());
  EXPECT_TRUE(load_range(f, meta, 0, n).is_ok());
  EXPECT_TRUE(load_range(f, meta, 5, 9).is_ok());
  // A stray manifest that trainer.json does not list is not read: the layout is the one written.
  std::ofstream(f.dir + "/" + checkpoint_file::kManifest) << "{}";
  EXPECT_TRUE(load_range(f, meta, 0, n).is_ok());
  // Opening reads trainer.json alone: a rank that receives the weights and moments from rank 0
  // needs no other file.
  const std::string model = f.dir + "/" + checkpoint_file::kModel;
  const std::string state = f.dir + "/" + checkpoint_file::kOptimizer;
  fs::rename(model, model + ".away");
  fs::rename(state, state + ".away");
  EXPECT_TRUE(read_checkpoint_meta(f.dir, &meta).is_ok());
  Status st = load_weights(f, meta);
  EXPECT_EQ(st.code(), StatusCode::kNotFound) << st.to_string();
  EXPECT_NE(st.message().find(model + ": no such file"), std::string::npos) << st.message();
  fs::rename(model + ".away", model);
  fs::rename(state + ".away", state);
  // Damage the loader sees (a byte of the safetensors header or of the state file's magic:
  // parsing fails) and damage it cannot (a value: parsing succeeds, the state file's own
  // CRC32C aside) are both reported as damage, naming the file; so is another size.
  for (const long at : {10L, -1L}) {
    for (const std::string& path : {model, state}) {
      const std::string saved = path + ".saved";
      fs::copy_file(path, saved, fs::copy_options::overwrite_existing);
      damage_byte(path, path == state && at > 0 ? 0 : at);
      st = path == model ? load_weights(f, meta) : load_range(f, meta, 0, n);
      EXPECT_EQ(st.code(), StatusCode::kCorrupt) << path << " at " << at << ": " << st.to_string();
      EXPECT_NE(st.message().find(path + ": size or CRC32C differs"), std::string::npos) << st.message();
      fs::rename(saved, path);
    }
  }
  std::ofstream(model, std::ios::app) << "x";
  st = load_weights(f, meta);
  EXPECT_NE(st.message().find(model + ": size or CRC32C differs"), std::string::npos) << st.message();
  fs::remove_all(f.root);
}

TEST(CheckpointFiles, AFileTrainerJsonDoesNotListIsRefused) {
  const Fixture f = write_fixture("unlisted", false);
  CheckpointMeta meta;
  ASSERT_TRUE(read_checkpoint_meta(f.dir, &meta).is_ok());
  meta.files.erase(checkpoint_file::kOptimizer);
  const Status st = verify_checkpoint_file(f.dir, meta, checkpoint_file::kOptimizer);
  EXPECT_EQ(st.code(), StatusCode::kCorrupt) << st.to_string();
  EXPECT_NE(st.message().find("not listed in " + f.dir + "/trainer.json"), std::string::npos) << st.message();
  fs::remove_all(f.root);
}

// Rank 0 records the digest each rank took of its own slice (it reads back only the weights
// and the manifest), after checking the file's size: a slice that rank 0 sees at another size
// (a checkpoint.dir that is not one shared file system) or not at all is an error naming it.
TEST(CheckpointFiles, ShardedCommitsRecordTheDigestsTheRanksTook) {
  Fixture f = write_fixture("rank_digests", true);
  const std::string root = f.root.string();
  const CheckpointMeta meta = test_meta(8);
  const size_t n = f.table.total_elements();
  auto write_slices = [&](const std::string& tmp) {
    EXPECT_TRUE(create_checkpoint_tmp(root, tmp).is_ok());
    std::vector<OptimizerSlice> slices;
    for (int r = 0; r < kRanks; ++r) {
      const size_t begin = n * r / kRanks, end = n * (r + 1) / kRanks;
      OptimizerSlice s;
      EXPECT_TRUE(write_optimizer_slice(tmp, r, meta.optimizer, f.m.data() + begin, f.v.data() + begin, begin, end, &s)
                      .is_ok());
      EXPECT_EQ(s.digest.bytes, fs::file_size(tmp + "/" + s.file));
      slices.push_back(s);
    }
    return slices;
  };
  // A slice changed after its rank's digest (same size): the record is the rank's, so the
  // change shows as damage, which it would not had rank 0 read the file back.
  std::string tmp = checkpoint_tmp_dir(root, meta.step, 1);
  std::vector<OptimizerSlice> slices = write_slices(tmp);
  flip_a_byte(tmp + "/" + slices[1].file);
  std::string dir;
  ASSERT_TRUE(commit_sharded_checkpoint(root, tmp, meta, f.table, f.params.data(), slices, 5, false, &dir).is_ok());
  CheckpointInventory inv;
  const Status st = verify_whole_checkpoint(dir, &inv);
  EXPECT_NE(st.message().find(slices[1].file + ": size or CRC32C differs"), std::string::npos) << st.to_string();
  // Another size on rank 0's side, and a slice rank 0 cannot see.
  const CheckpointMeta later = test_meta(9);
  tmp = checkpoint_tmp_dir(root, later.step, 2);
  slices = write_slices(tmp);
  std::ofstream(tmp + "/" + slices[2].file, std::ios::app) << "x";
  Status bad = commit_sharded_checkpoint(root, tmp, later, f.table, f.params.data(), slices, 5, false, &dir);
  EXPECT_EQ(bad.code(), StatusCode::kIoError) << bad.to_string();
  EXPECT_NE(bad.message().find(slices[2].file + ": " + std::to_string(slices[2].digest.bytes + 1) + " bytes here, " +
                               std::to_string(slices[2].digest.bytes) + " as its rank wrote it"),
            std::string::npos)
      << bad.message();
  fs::remove(tmp + "/" + slices[2].file);
  bad = commit_sharded_checkpoint(root, tmp, later, f.table, f.params.data(), slices, 5, false, &dir);
  EXPECT_NE(bad.message().find(slices[2].file + ": missing"), std::string::npos) << bad.message();
  EXPECT_FALSE(fs::exists(checkpoint_step_dir(root, later.step)));
  fs::remove_all(f.root);
}

// The start-up estimate of a checkpoint's size against a bert-tiny checkpoint as written (its
// headers and trainer.json are the difference), and the warnings it leads to.
TEST(CheckpointFiles, SizeEstimateAndTheSpaceWarning) {
  BertConfig mc;
  ASSERT_TRUE(bert_preset("bert-tiny", &mc).is_ok());
  Fixture f;
  f.root = fs::temp_directory_path() / ("lansbert_ckpt_files_size_" + std::to_string(::getpid()));
  fs::remove_all(f.root);
  f.table = make_bert_param_table(mc);
  const size_t n = f.table.total_elements();
  f.params.assign(n, 0.f);
  f.m.assign(n, 0.f);
  f.v.assign(n, 0.f);
  ASSERT_TRUE(write_checkpoint(f.root.string(), test_meta(1), f.table, f.params.data(), f.m.data(), f.v.data(), 2,
                               false, &f.dir).is_ok());
  uint64_t on_disk = 0;
  for (const auto& e : fs::directory_iterator(f.dir)) on_disk += fs::file_size(e.path());
  const uint64_t estimate = checkpoint_bytes_estimate(f.table);
  EXPECT_LE(estimate, on_disk);
  EXPECT_GT(double(estimate), 0.98 * double(on_disk)) << estimate << " vs " << on_disk;
  fs::remove_all(f.root);

  const uint64_t GB = 1000000000;
  // Room for keep_last + 1 (the newest is written before the oldest goes): no warning.
  EXPECT_EQ(checkpoint_space_warning("ck", 16 * GB, 4 * GB, 3, 0), "");
  // Checkpoints already there count as written: room for the one more.
  EXPECT_EQ(checkpoint_space_warning("ck", 4 * GB, 4 * GB, 3, 3), "");
  EXPECT_EQ(checkpoint_space_warning("ck", 4 * GB, 4 * GB, 3, 7), "");
  const std::string later = checkpoint_space_warning("ck", 15 * GB, 4 * GB, 3, 0);
  EXPECT_NE(later.find("checkpoint.dir ck: 15.00 GB free on its file system, and a checkpoint of this run takes "
                       "about 4.00 GB; keeping checkpoint.keep_last 3 of them needs up to 16.00 GB more"),
            std::string::npos)
      << later;
  // The largest keep_last an int holds: no overflow on the way.
  EXPECT_NE(checkpoint_space_warning("ck", 15 * GB, 4 * GB, 2147483647, 0).find("needs up to 8589934592.00 GB more"),
            std::string::npos);
  const std::string first = checkpoint_space_warning("ck", 3 * GB, 4 * GB, 3, 2);
  EXPECT_NE(first.find("3.00 GB free on its file system, and a checkpoint of this run takes about 4.00 GB: the "
                       "first checkpoint will fail"),
            std::string::npos)
      << first;
}

// trainer.json without its own checksum (as builds before it wrote), edited by `edit`.
void edit_old_style_meta(const std::string& dir, const std::function<void(nlohmann::json&)>& edit) {
  const std::string path = dir + "/" + checkpoint_file::kMeta;
  std::ifstream in(path);
  nlohmann::json j = nlohmann::json::parse(in);
  in.close();
  j.erase("checksum");
  edit(j);
  std::ofstream(path, std::ios::trunc) << j.dump(2) << "\n";
}

TEST(CheckpointFiles, VerifyingAWholeCheckpointChecksEveryFile) {
  Fixture f = write_fixture("whole", true);
  CheckpointInventory inv;
  ASSERT_TRUE(verify_whole_checkpoint(f.dir, &inv).is_ok());
  EXPECT_EQ(inv.step, 7);
  EXPECT_EQ(inv.files, kRanks + 2);  // model, manifest, slices
  EXPECT_EQ(inv.slices, kRanks);
  uint64_t bytes = 0;
  for (const auto& e : fs::directory_iterator(f.dir))
    if (e.path().filename() != checkpoint_file::kMeta) bytes += fs::file_size(e.path());
  EXPECT_EQ(inv.bytes, bytes);
  // Any rank's slice: the one no reader of a range would have opened is found too.
  flip_a_byte(f.dir + "/" + f.slices[1].file);
  Status st = verify_whole_checkpoint(f.dir, &inv);
  EXPECT_EQ(st.code(), StatusCode::kCorrupt) << st.to_string();
  EXPECT_NE(st.message().find(f.slices[1].file + ": size or CRC32C differs"), std::string::npos) << st.message();
  flip_a_byte(f.dir + "/" + f.slices[1].file);
  ASSERT_TRUE(verify_whole_checkpoint(f.dir, &inv).is_ok());
  // A slice the manifest names but trainer.json does not list cannot be checked.
  edit_old_style_meta(f.dir, [&](nlohmann::json& j) { j["files"].erase(f.slices[2].file); });
  st = verify_whole_checkpoint(f.dir, &inv);
  EXPECT_EQ(st.code(), StatusCode::kCorrupt) << st.to_string();
  EXPECT_NE(st.message().find(f.slices[2].file + ": not listed in "), std::string::npos) << st.message();
  fs::remove_all(f.root);

  // Replicated: trainer.json that lists no optimizer state names the file that is missing.
  Fixture r = write_fixture("whole_replicated", false);
  ASSERT_TRUE(verify_whole_checkpoint(r.dir, &inv).is_ok());
  EXPECT_EQ(inv.files, 2);
  EXPECT_EQ(inv.slices, 0);
  edit_old_style_meta(r.dir, [](nlohmann::json& j) { j["files"].erase(checkpoint_file::kOptimizer); });
  st = verify_whole_checkpoint(r.dir, &inv);
  EXPECT_NE(st.message().find(std::string(checkpoint_file::kOptimizer) + ": not listed in "), std::string::npos)
      << st.message();
  fs::remove_all(r.root);
}

}  // namespace
}  // namespace lansbert
