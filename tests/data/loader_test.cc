// Loader: the batches equal direct reads in the sampler's order, across epochs and from a
// resumed position; dynamic masking is applied and repeatable; a corrupt record surfaces as
// the Status of next(); stopping mid-stream joins cleanly.
#include "lansbert/data/loader.h"

#include <gtest/gtest.h>

#include <fstream>
#include <map>
#include <iterator>

#include "test_util.h"

namespace lansbert {
namespace {

// Writes `shards` shards of our format from synthetic documents; returns the directory.
std::string make_shards(const std::string& name, int shards, bool dynamic) {
  const std::string dir = testing::scratch_dir(name);
  InstanceOptions opts;
  opts.dynamic_masking = dynamic;
  for (int s = 0; s < shards; ++s) {
    std::vector<Instance> insts;
    create_instances(testing::synthetic_documents(30, 20, 20, 100 + s), s * 1000, 0, opts,
                     testing::test_vocab(), 1, &insts);
    ShardInfo info;
    info.vocab_size = 30522;
    info.dynamic_masking = dynamic;
    std::unique_ptr<ShardWriter> w;
    EXPECT_TRUE(ShardWriter::create(dir + "/shard-" + std::to_string(s) + ".lbs", info, &w).is_ok());
    for (const auto& i : insts) EXPECT_TRUE(w->add(i).is_ok());
    EXPECT_TRUE(w->finish().is_ok());
  }
  return dir;
}

bool same_batch(const Batch& a, const Batch& b) {
  return a.input_ids == b.input_ids && a.segment_ids == b.segment_ids && a.input_mask == b.input_mask &&
         a.masked_positions == b.masked_positions && a.masked_ids == b.masked_ids &&
         a.nsp_labels == b.nsp_labels;
}

TEST(Loader, MatchesDirectReadsAndResumes) {
  const std::string dir = make_shards("loader", 3, false);
  std::unique_ptr<ShardSet> set, direct;
  ASSERT_TRUE(ShardSet::open({dir}, {}, &set).is_ok());
  ASSERT_TRUE(ShardSet::open({dir}, {}, &direct).is_ok());
  LoaderOptions opts;
  opts.world = 2;
  opts.rank = 1;
  opts.micro_batch = 4;
  opts.global_batch = 16;
  opts.start = DataPosition{0, 16};
  std::unique_ptr<Loader> loader;
  ASSERT_TRUE(Loader::create(set.get(), opts, &loader).is_ok());
  const Sampler& sampler = loader->sampler();
  // Two epochs' worth of micro-batches.
  const int steps = int(2 * sampler.batches_per_epoch());
  DataPosition pos = opts.start;
  Batch got, want;
  want.resize(4, set->seq_len(), set->max_pred());
  std::vector<Sampler::Drawn> idx;
  for (int step = 0; step < steps; ++step) {
    for (int m = 0; m < 2; ++m) {
      MicroBatchInfo info;
      ASSERT_TRUE(loader->next(&got, &info).is_ok());
      ASSERT_EQ(info.pos, pos);
      ASSERT_EQ(info.micro, m);
      ASSERT_EQ(info.last, m == 1);
      sampler.micro_batch_indices(pos, m, &idx);
      for (int j = 0; j < 4; ++j) ASSERT_TRUE(direct->read(int64_t(idx[j].index), &want, j).is_ok());
      ASSERT_TRUE(same_batch(got, want)) << "step " << step << " micro " << m;
    }
    pos = sampler.advance(pos);
  }
  EXPECT_EQ(pos.epoch, 2u);
  loader->stop();  // with the ring full: must not hang
  EXPECT_FALSE(loader->next(&got).is_ok());
}

TEST(Loader, DynamicMaskingIsAppliedAndRepeatable) {
  const std::string dir = make_shards("loader_dyn", 2, true);
  std::unique_ptr<ShardSet> set;
  ASSERT_TRUE(ShardSet::open({dir}, {}, &set).is_ok());
  ASSERT_TRUE(set->dynamic_masking());
  LoaderOptions opts;
  opts.micro_batch = 8;
  opts.global_batch = 8;
  std::vector<Batch> first;
  for (int run = 0; run < 2; ++run) {
    std::unique_ptr<Loader> loader;
    ASSERT_TRUE(Loader::create(set.get(), opts, &loader).is_ok());
    for (int i = 0; i < 5; ++i) {
      Batch b;
      ASSERT_TRUE(loader->next(&b).is_ok());
      for (int r = 0; r < 8; ++r) ASSERT_NE(b.masked_positions[r * b.max_pred], 0);  // masked
      if (run == 0) {
        first.push_back(b);
      } else {
        ASSERT_TRUE(same_batch(first[i], b));
      }
    }
  }
}

// A blend (LoaderOptions::blend) reads the set's sources in the sampler's order; dynamic masks
// are keyed by the epoch of the source a sample is drawn in, so a small source's repeats are
// masked anew (keyed by the run's epoch, 0 in a blend, they would be masked alike).
TEST(Loader, BlendReadsItsSourcesAndMasksRepeatsAnew) {
  for (const bool dynamic : {false, true}) {
    const std::string dir = make_shards(dynamic ? "loader_blend_dyn" : "loader_blend", 2, dynamic);
    const std::vector<std::vector<std::string>> sources{{dir + "/shard-1.lbs"}, {dir + "/shard-0.lbs"}};
    std::unique_ptr<ShardSet> set, direct;
    ASSERT_TRUE(ShardSet::open_sources(sources, {}, &set).is_ok());
    ASSERT_TRUE(ShardSet::open_sources(sources, {}, &direct).is_ok());
    const int64_t small = set->source_sizes()[1];
    LoaderOptions opts;
    opts.micro_batch = 8;
    opts.global_batch = 16;
    auto blend = std::make_shared<BlendSchedule>();
    ASSERT_TRUE(BlendSchedule::create({1, 3}, "w", blend.get()).is_ok());
    opts.blend = blend;
    std::unique_ptr<Loader> loader;
    ASSERT_TRUE(Loader::create(set.get(), opts, &loader).is_ok());
    // Source 2 (shard-0) three epochs over.
    const int micro_batches = int(3 * small * 4 / 3 / 8) + 1;
    Batch got, want;
    want.resize(8, set->seq_len(), set->max_pred());
    std::vector<Sampler::Drawn> drawn;
    std::map<uint64_t, std::vector<std::vector<int32_t>>> masks;  // sample -> its masks, an epoch each
    int64_t from_small = 0;
    for (int i = 0; i < micro_batches; ++i) {
      MicroBatchInfo info;
      ASSERT_TRUE(loader->next(&got, &info).is_ok());
      EXPECT_EQ(info.pos.epoch, 0u);
      loader->sampler().micro_batch_indices(info.pos, info.micro, &drawn);
      for (int j = 0; j < 8; ++j) {
        ASSERT_TRUE(direct->read(int64_t(drawn[j].index), &want, j).is_ok());
        from_small += int64_t(drawn[j].index) >= set->source_sizes()[0];
        const auto row = [&](const Batch& b, const std::vector<int32_t>& v, int width) {
          return std::vector<int32_t>(v.begin() + j * width, v.begin() + (j + 1) * width);
        };
        const std::vector<int32_t> got_masked = row(got, got.masked_positions, got.max_pred);
        if (!dynamic) {
          ASSERT_EQ(got_masked, row(want, want.masked_positions, want.max_pred));
          ASSERT_EQ(row(got, got.input_ids, got.seq_len), row(want, want.input_ids, want.seq_len));
        } else {
          ASSERT_EQ(masks[drawn[j].index].size(), drawn[j].epoch);
          masks[drawn[j].index].push_back(got_masked);
        }
      }
    }
    EXPECT_NEAR(double(from_small), 0.75 * micro_batches * 8, 2.0);
    if (!dynamic) continue;
    int repeats = 0, masked_alike = 0;
    for (const auto& [sample, per_epoch] : masks)
      for (size_t e = 1; e < per_epoch.size(); ++e) ++repeats, masked_alike += per_epoch[e] == per_epoch[0];
    EXPECT_GT(repeats, int(small));
    EXPECT_LT(masked_alike, repeats / 10) << masked_alike << " of " << repeats;
  }
}

// LoaderOptions::pack: the same micro-batches (dynamically masked as before packing), each
// sequence's tokens moved to where sequence_row/sequence_start say, in fewer rows; and a slot
// that held a packed batch is filled unpacked again.
TEST(Loader, PackedBatchesHoldTheSameSequences) {
  const std::string dir = make_shards("loader_pack", 2, true);
  // Each loader reads its own set (a set is read by one thread), declared before the loaders
  // so that it outlives their threads.
  std::unique_ptr<ShardSet> set, set2;
  ASSERT_TRUE(ShardSet::open({dir}, {}, &set).is_ok());
  ASSERT_TRUE(ShardSet::open({dir}, {}, &set2).is_ok());
  LoaderOptions opts;
  opts.micro_batch = 8;
  opts.global_batch = 16;
  opts.prefetch = 2;
  std::unique_ptr<Loader> plain, packing;
  ASSERT_TRUE(Loader::create(set.get(), opts, &plain).is_ok());
  opts.pack = true;
  ASSERT_TRUE(Loader::create(set2.get(), opts, &packing).is_ok());
  int64_t rows = 0, sequences = 0;
  Batch a, b;
  for (int i = 0; i < 12; ++i) {
    ASSERT_TRUE(plain->next(&a).is_ok());
    ASSERT_TRUE(packing->next(&b).is_ok());
    ASSERT_TRUE(b.packed());
    ASSERT_EQ(b.batch, 8);
    EXPECT_EQ(b.masked_positions, a.masked_positions);
    EXPECT_EQ(b.masked_ids, a.masked_ids);
    EXPECT_EQ(b.nsp_labels, a.nsp_labels);
    const int S = a.seq_len;
    for (int j = 0; j < 8; ++j) {
      int len = 0;
      while (len < S && a.input_mask[size_t(j) * S + len]) ++len;
      const size_t at = size_t(b.sequence_row[j]) * S + b.sequence_start[j];
      for (int t = 0; t < S; ++t) {
        const bool in = t < len;
        if (!in && b.sequence_start[j] + t < S) {
          EXPECT_NE(b.input_mask[at + t], b.input_mask[at]);
        }
        if (!in) continue;
        ASSERT_EQ(b.input_ids[at + t], a.input_ids[size_t(j) * S + t]) << i << " " << j << " " << t;
        ASSERT_EQ(b.segment_ids[at + t], a.segment_ids[size_t(j) * S + t]);
        ASSERT_EQ(b.input_mask[at + t], b.input_mask[at]);
      }
    }
    rows += b.rows;
    sequences += b.batch;
  }
  std::printf("%lld sequences in %lld rows\n", (long long)sequences, (long long)rows);
  EXPECT_LT(rows, sequences);
}

// LoaderOptions::whole_word (the trainer's data.whole_word) masks whole words in shards
// whose header does not ask for it: every word is masked in all its pieces or in none.
TEST(Loader, ForcedWholeWordMaskingMasksWholeWords) {
  const std::string dir = make_shards("loader_ww", 1, true);
  std::unique_ptr<ShardSet> set, direct;
  ASSERT_TRUE(ShardSet::open({dir}, {}, &set).is_ok());
  ASSERT_TRUE(ShardSet::open({dir}, {}, &direct).is_ok());
  ASSERT_FALSE(set->info()->whole_word);
  LoaderOptions opts;
  opts.micro_batch = 8;
  opts.global_batch = 8;
  opts.is_continuation = testing::test_vocab().is_continuation;
  // Counts the words masked in some pieces but not all, over `batches` batches.
  auto split_words = [&](bool whole_word, int batches) {
    opts.whole_word = whole_word;
    std::unique_ptr<Loader> loader;
    EXPECT_TRUE(Loader::create(set.get(), opts, &loader).is_ok());
    int split = 0;
    Batch b, raw;
    raw.resize(8, set->seq_len(), set->max_pred());
    std::vector<Sampler::Drawn> idx;
    for (int i = 0; i < batches; ++i) {
      MicroBatchInfo info;
      EXPECT_TRUE(loader->next(&b, &info).is_ok());
      loader->sampler().micro_batch_indices(info.pos, info.micro, &idx);
      for (int r = 0; r < 8; ++r) {
        EXPECT_TRUE(direct->read(int64_t(idx[r].index), &raw, r).is_ok());
        const int S = b.seq_len;
        std::vector<bool> masked(size_t(S), false);
        for (int k = 0; k < b.max_pred; ++k) {
          const int p = b.masked_positions[size_t(r) * b.max_pred + k];
          if (p > 0) masked[size_t(p)] = true;
        }
        // A word: a piece that is not a continuation (or follows [CLS]/[SEP], which are never
        // masked), then the continuations after it.
        const ShardInfo& h = *set->info();
        auto id = [&](int q) { return raw.input_ids[size_t(r) * S + q]; };
        for (int p = 0; p < S;) {
          int end = p + 1;
          if (id(p) != h.cls_id && id(p) != h.sep_id)
            while (end < S && opts.is_continuation[size_t(id(end))]) ++end;
          bool any = false, all = true;
          for (int q = p; q < end; ++q) any = any || masked[size_t(q)], all = all && masked[size_t(q)];
          split += any && !all;
          p = end;
        }
      }
    }
    return split;
  };
  EXPECT_GT(split_words(false, 5), 0);  // token-level masking splits words: the check can fail
  EXPECT_EQ(split_words(true, 5), 0);
}

// A sample packing cannot take (a masked slot past its tokens: a writer's bug the record's
// checksum does not catch) is refused by file and index in that file, not by global index.
TEST(Loader, UnpackableSampleIsNamedByFile) {
  const std::string dir = make_shards("loader_unpackable", 2, false);
  const std::string path = dir + "/shard-1.lbs";
  std::vector<Instance> insts;
  create_instances(testing::synthetic_documents(30, 20, 20, 101), 1000, 0, InstanceOptions{}, testing::test_vocab(),
                   1, &insts);
  ASSERT_GT(insts.size(), 3u);
  ASSERT_FALSE(insts[3].masked_positions.empty());
  ASSERT_LT(insts[3].tokens.size(), 128u);
  insts[3].masked_positions.back() = int32_t(insts[3].tokens.size());  // inside the sequence, past the tokens
  ShardInfo info;
  info.vocab_size = 30522;
  std::unique_ptr<ShardWriter> w;
  ASSERT_TRUE(ShardWriter::create(path, info, &w).is_ok());
  for (const auto& i : insts) ASSERT_TRUE(w->add(i).is_ok());
  ASSERT_TRUE(w->finish().is_ok());
  std::unique_ptr<ShardSet> set;
  ASSERT_TRUE(ShardSet::open({dir}, {}, &set).is_ok());
  EXPECT_EQ(set->where(set->count() - 1), path + ": sample " + std::to_string(insts.size() - 1));
  LoaderOptions opts;
  opts.micro_batch = 8;
  opts.global_batch = 8;
  opts.pack = true;
  std::unique_ptr<Loader> loader;
  ASSERT_TRUE(Loader::create(set.get(), opts, &loader).is_ok());
  Batch b;
  Status s;
  for (int64_t i = 0; i <= set->count() / 8 && s.is_ok(); ++i) s = loader->next(&b);  // one epoch, and one more
  ASSERT_EQ(s.code(), StatusCode::kInvalidArgument) << s.message();
  EXPECT_NE(s.message().find("data.packing: " + path + ": sample 3: masked slot"), std::string::npos) << s.message();
}

TEST(Loader, CorruptRecordIsReturnedByNext) {
  const std::string dir = make_shards("loader_bad", 1, false);
  const std::string path = dir + "/shard-0.lbs";
  std::string bytes;
  {
    std::ifstream f(path, std::ios::binary);
    bytes.assign(std::istreambuf_iterator<char>(f), {});
  }
  for (size_t off = 300; off < bytes.size(); off += 997) bytes[off] ^= 0x40;  // every record-ish
  {
    std::ofstream f(path, std::ios::binary | std::ios::trunc);
    f << bytes;
  }
  std::unique_ptr<ShardSet> set;
  ASSERT_TRUE(ShardSet::open({dir}, {}, &set).is_ok());
  LoaderOptions opts;
  opts.micro_batch = 8;
  opts.global_batch = 8;
  std::unique_ptr<Loader> loader;
  ASSERT_TRUE(Loader::create(set.get(), opts, &loader).is_ok());
  Batch b;
  Status s;
  for (int i = 0; i < 50 && s.is_ok(); ++i) s = loader->next(&b);
  ASSERT_EQ(s.code(), StatusCode::kCorrupt);
  EXPECT_NE(s.message().find(path), std::string::npos) << s.message();
}

TEST(Loader, RejectsAPositionFromAnotherBatchSize) {
  const std::string dir = make_shards("loader_pos", 1, false);
  std::unique_ptr<ShardSet> set;
  ASSERT_TRUE(ShardSet::open({dir}, {}, &set).is_ok());
  LoaderOptions opts;
  opts.micro_batch = 4;
  opts.global_batch = 8;
  opts.start = DataPosition{0, 12};
  std::unique_ptr<Loader> loader;
  EXPECT_EQ(Loader::create(set.get(), opts, &loader).code(), StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace lansbert
