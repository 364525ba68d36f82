// Helpers for the trainer tests: a tiny vocabulary and tiny shards with a learnable pattern
// (ids drawn from a steep power law, so even the unigram statistics take the MLM loss far
// below ln(vocab) within a few dozen updates),
// and a tiny config that trains in seconds on two cores.
#pragma once

#include <filesystem>
#include <fstream>
#include <memory>
#include <string>
#include <vector>

#include "lansbert/core/philox.h"
#include "lansbert/data/instances.h"
#include "lansbert/data/shard.h"
#include "lansbert/data/vocab.h"
#include "lansbert/train/evaluate.h"
#include "lansbert/train/train_config.h"

namespace lansbert::testing {

constexpr int kTinyVocab = 64;

inline std::string write_tiny_vocab(const std::string& dir) {
  const std::string path = dir + "/vocab.txt";
  std::ofstream f(path);
  f << "[PAD]\n[UNK]\n[CLS]\n[SEP]\n[MASK]\n";
  for (int i = 5; i < kTinyVocab; ++i) f << "w" << i << "\n";
  return path;
}

// Writes dir/vocab.txt and dir/shards/shard-00000.lbs; returns the shard glob. With
// repeat_first, every sample is a copy of the first (the same tokens, segments and masked
// slots), so that every batch of them has the same gradient.
inline std::string write_tiny_shards(const std::string& dir, int docs = 300, int seq_len = 32,
                                     int max_pred = 5, uint64_t seed = 7, bool empty_masked_slots = false,
                                     bool repeat_first = false) {
  std::filesystem::create_directories(dir + "/shards");
  Vocab vocab;
  if (!Vocab::load(write_tiny_vocab(dir), &vocab).is_ok()) return "";
  std::vector<Document> documents(docs);
  uint64_t e = 0;
  auto draw = [&](uint32_t m) { return philox_bits(RngKey{seed, 0, 0}, e++) % m; };
  for (Document& d : documents) {
    d.resize(4 + draw(4));
    for (auto& s : d) {
      s.resize(3 + draw(6));
      for (auto& t : s) {
        const double u = draw(1u << 20) / double(1u << 20);
        t = 5 + int((kTinyVocab - 5) * u * u * u * u * u * u);
      }
    }
  }
  InstanceOptions io;
  io.max_seq_len = seq_len;
  io.max_pred = max_pred;
  io.dupe_factor = 2;
  io.seed = seed;
  MaskingVocab mv;
  mv.cls_id = 2, mv.sep_id = 3, mv.mask_id = 4, mv.vocab_size = kTinyVocab;
  mv.is_continuation.assign(kTinyVocab, false);
  std::vector<Instance> instances;
  for (int pass = 0; pass < io.dupe_factor; ++pass)
    create_instances(documents, 0, pass, io, mv, 1, &instances);
  ShardInfo info;
  info.seq_len = seq_len;
  info.max_pred = max_pred;
  info.vocab_size = kTinyVocab;
  info.vocab_hash = vocab.hash();
  info.cls_id = 2, info.sep_id = 3, info.mask_id = 4;
  info.seed = seed;
  info.dupe_factor = io.dupe_factor;
  std::unique_ptr<ShardWriter> w;
  if (!ShardWriter::create(dir + "/shards/shard-00000.lbs", info, &w).is_ok()) return "";
  if (repeat_first && !instances.empty()) instances.assign(instances.size(), instances.front());
  for (Instance& inst : instances) {
    if (empty_masked_slots) inst.masked_positions.clear(), inst.masked_ids.clear();
    if (!w->add(inst).is_ok()) return "";
  }
  if (!w->finish().is_ok()) return "";
  return dir + "/shards/*.lbs";
}

// A tiny model on the tiny shards of `data_dir`, checkpoints under `ckpt`.
inline TrainConfig tiny_config(const std::string& data_dir, const std::string& ckpt, int64_t steps) {
  TrainConfig c;
  c.model.preset = "bert-tiny";
  c.model.vocab_size = kTinyVocab;
  c.model.hidden = 64;
  c.model.heads = 2;
  c.model.intermediate = 128;
  c.model.max_positions = 64;
  c.data.train = {data_dir + "/shards/*.lbs"};
  c.data.vocab = data_dir + "/vocab.txt";
  c.data.seq_len = 32;
  c.data.max_pred = 5;
  c.batch.global_batch = 32;
  c.batch.micro_batch = 16;
  c.schedule.peak_lr = 0.01;
  c.schedule.total_steps = steps;
  c.schedule.warmup_ratio = 0.1;
  c.schedule.constant_ratio = 0.5;
  c.checkpoint.dir = ckpt;
  c.checkpoint.every_steps = 0;
  c.checkpoint.keep_last = 2;
  c.logging.every_steps = 5;
  c.seed = 42;
  return c;
}

// run_eval's options over a tiny config's own training shards, 16 sequences a micro-batch.
inline EvalOptions tiny_eval_options(const TrainConfig& c, int64_t max_sequences) {
  EvalOptions o;
  o.data = c.data.train;
  o.micro_batch = 16;
  o.max_sequences = max_sequences;
  return o;
}

}  // namespace lansbert::testing
