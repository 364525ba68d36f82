// convert_hdf5_shards and the exactness rule of one row (data/hdf5_convert.h).
#include "lansbert/data/hdf5_convert.h"

#include <fmt/format.h>

#include <filesystem>
#include <memory>

#include "lansbert/core/stop_signals.h"
#include "lansbert/data/dataset.h"
#include "lansbert/data/hdf5_shard.h"
#include "shard_staging.h"

namespace lansbert {

Status batch_row_to_instance(const Batch& b, int row, Instance* out) {
  const int S = b.seq_len, P = b.max_pred;
  const int32_t* ids = b.input_ids.data() + size_t(row) * S;
  const int32_t* seg = b.segment_ids.data() + size_t(row) * S;
  const int32_t* msk = b.input_mask.data() + size_t(row) * S;
  int n = 0;
  while (n < S && msk[n] == 1) ++n;
  if (n == 0) return Status::invalid_argument(fmt::format("input_mask[0] = {}: no tokens", msk[0]));
  for (int i = n; i < S; ++i)
    if (msk[i] != 0)
      return Status::invalid_argument(fmt::format("input_mask[{}] = {} after input_mask[{}] = 0: a lansbert "
                                                  "record holds a sequence as its first tokens",
                                                  i, msk[i], n));
  for (int i = n; i < S; ++i) {
    if (ids[i] != 0)
      return Status::invalid_argument(fmt::format("input_ids[{}] = {} in the padding (input_mask 0)", i, ids[i]));
    if (seg[i] != 0)
      return Status::invalid_argument(fmt::format("segment_ids[{}] = {} in the padding (input_mask 0)", i, seg[i]));
  }
  // Sentence A ends just before the first 1 (a sequence of A alone has none).
  int a_end = n - 1;
  for (int i = 0; i < n; ++i)
    if (seg[i] != 0) {
      a_end = i - 1;
      break;
    }
  if (a_end < 0) return Status::invalid_argument(fmt::format("segment_ids[0] = {}: sentence A must come first", seg[0]));
  for (int i = a_end + 1; i < n; ++i)
    if (seg[i] != 1)
      return Status::invalid_argument(
          fmt::format("segment_ids[{}] = {} after sentence B began at [{}]: a lansbert record holds segments "
                      "0 then 1", i, seg[i], a_end + 1));
  const int32_t* pos = b.masked_positions.data() + size_t(row) * P;
  const int32_t* orig = b.masked_ids.data() + size_t(row) * P;
  int m = 0;
  while (m < P && orig[m] != Batch::kIgnore) ++m;
  for (int k = m; k < P; ++k) {
    if (orig[k] != Batch::kIgnore)
      return Status::invalid_argument(fmt::format("masked_lm_ids[{}] = {} after an empty slot [{}]: a lansbert "
                                                  "record fills its masked slots from the first", k, orig[k], m));
    // An empty slot reads back at position 0: one that names a position would not.
    if (pos[k] != 0)
      return Status::invalid_argument(fmt::format("masked_lm_positions[{}] = {} with masked_lm_ids[{}] = {}: a "
                                                  "lansbert record's empty slots are at position 0",
                                                  k, pos[k], k, orig[k]));
  }
  out->tokens.assign(ids, ids + n);
  out->a_end = a_end;
  out->is_random_next = b.nsp_labels[row] != 0;
  out->masked_positions.assign(pos, pos + m);
  out->masked_ids.assign(orig, orig + m);
  return Status::ok();
}

namespace {

// Converts shard `s` of `set` (samples [first, first + count) of its global index) to `path`.
Status convert_one(ShardSet& set, size_t s, int64_t first, const Hdf5ConvertOptions& opts, const std::string& path) {
  ShardReader& in = set.shard(s);
  ShardInfo info = opts.vocab;
  info.seq_len = in.seq_len();
  info.max_pred = in.max_pred();
  // What made the samples is not recorded in HDF5 files: 0 says unknown.
  info.seed = 0;
  info.dupe_factor = 0;
  info.masked_lm_prob = 0;
  info.short_seq_prob = 0;
  info.whole_word = false;
  info.dynamic_masking = false;
  std::unique_ptr<ShardWriter> w;
  LB_RETURN_IF_ERROR(ShardWriter::create(path, info, &w));
  Batch b;
  b.resize(1, in.seq_len(), in.max_pred());
  Instance inst;
  for (int64_t i = 0; i < in.count(); ++i) {
    if (opts.stop && (i & 1023) == 0)
      if (const int sig = opts.stop())
        return Status::interrupted(fmt::format("convert: stopped by {}; {} is as it was before the run",
                                               signal_name(sig), opts.out_dir));
    LB_RETURN_IF_ERROR(set.read(first + i, &b, 0));  // ids within the vocabulary, labels 0 or 1
    const Status st = batch_row_to_instance(b, 0, &inst);
    if (!st.is_ok()) return st.with_prefix(fmt::format("{}: sample {}: ", in.path(), i));
    LB_RETURN_IF_ERROR(w->add(inst));
  }
  return w->finish();
}

}  // namespace

Status convert_hdf5_shards(const Hdf5ConvertOptions& opts, Hdf5ConvertStats* stats) {
  *stats = Hdf5ConvertStats{};
  if (opts.vocab.vocab_size <= 0) return Status::invalid_argument("convert: no vocabulary");
  ShardSetOptions so;
  so.token_limit = opts.vocab.vocab_size;
  if (!opts.vocab_path.empty())
    so.token_limit_source = fmt::format("the vocabulary: --vocab {} has {} tokens; give convert the vocab.txt the "
                                        "files were made with", opts.vocab_path, opts.vocab.vocab_size);
  std::unique_ptr<ShardSet> set;
  LB_RETURN_IF_ERROR(ShardSet::open(opts.inputs, so, &set));
  for (size_t s = 0; s < set->num_shards(); ++s)
    if (!dynamic_cast<Hdf5ShardReader*>(&set->shard(s)))
      return Status::invalid_argument(fmt::format("{}: a lansbert shard, not an HDF5 file: convert reads NVIDIA's "
                                                  "HDF5 shards; lansbert's are read as they are",
                                                  set->shard(s).path()));
  ShardStaging staging;
  LB_RETURN_IF_ERROR(staging.open(opts.out_dir));
  int64_t first = 0;
  for (size_t s = 0; s < set->num_shards(); ++s) {
    auto& in = static_cast<Hdf5ShardReader&>(set->shard(s));
    const std::string name = fmt::format("shard-{:05d}.lbs", s);
    LB_RETURN_IF_ERROR(convert_one(*set, s, first, opts, staging.dir() + "/" + name));
    in.release();  // one decoded file in memory at a time
    first += in.count();
    stats->samples += in.count();
    std::error_code ec;
    const auto bytes = std::filesystem::file_size(staging.dir() + "/" + name, ec);
    stats->bytes_written += ec ? 0 : uint64_t(bytes);
    if (opts.on_file) opts.on_file(in.path(), opts.out_dir + "/" + name, in.count());
  }
  LB_RETURN_IF_ERROR(staging.commit(int64_t(set->num_shards())));
  stats->files = int64_t(set->num_shards());
  return Status::ok();
}

}  // namespace lansbert
