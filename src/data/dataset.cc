// ShardSet and open_shard: file discovery, format detection and the global index.
#include "lansbert/data/dataset.h"

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <glob.h>
#include <sys/stat.h>

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>

#include "lansbert/core/check.h"
#include "lansbert/core/crc32c.h"
#include "lansbert/data/hdf5_shard.h"
#include "lansbert/data/vocab.h"

namespace lansbert {

Status open_shard(const std::string& path, std::unique_ptr<ShardReader>* out, ShardFormat format) {
  char magic[8] = {};
  {
    std::ifstream f(path, std::ios::binary);
    if (!f) return Status::not_found(fmt::format("{}: cannot open shard file", path));
    f.read(magic, 8);
  }
  const bool hdf5 = std::memcmp(magic, "\x89HDF\r\n\x1a\n", 8) == 0;
  if (format == ShardFormat::kLbs && hdf5)
    return Status::invalid_argument(fmt::format("{}: an HDF5 file, where format lbs asks for lansbert shards", path));
  if (format == ShardFormat::kHdf5 && !hdf5)
    return Status::invalid_argument(fmt::format("{}: not an HDF5 file (no HDF5 signature at byte offset 0), where "
                                                "format hdf5 asks for NVIDIA's HDF5 shards", path));
  if (hdf5) {
    std::unique_ptr<Hdf5ShardReader> r;
    LB_RETURN_IF_ERROR(Hdf5ShardReader::open(path, &r));
    *out = std::move(r);
    return Status::ok();
  }
  // Anything else goes to our reader, whose error names a wrong magic.
  std::unique_ptr<LbShardReader> r;
  LB_RETURN_IF_ERROR(LbShardReader::open(path, &r));
  *out = std::move(r);
  return Status::ok();
}

namespace {
struct Found {
  std::string path;
  dev_t dev;
  ino_t ino;
};

// The files `patterns` name (directories: all files in them), sorted by path, each file once
// however spelled (a relative and an absolute path, "dir/" beside "dir/*.lbs", a symlink, a
// hard link: the first spelling in sorted order stays; by device and inode, from the stat the
// type check made, so no further call per file). None is an error naming the patterns.
Status collect_files(const std::vector<std::string>& patterns, const ShardSetOptions& opts, std::vector<Found>* out) {
  std::vector<Found> found;
  std::set<std::pair<dev_t, ino_t>> not_training;  // files training_only left out (one named twice: once)
  for (const auto& pattern : patterns) {
    std::error_code ec;
    const std::string pat = std::filesystem::is_directory(pattern, ec) ? pattern + "/*" : pattern;
    glob_t g{};
    if (::glob(pat.c_str(), 0, nullptr, &g) == 0) {
      for (size_t i = 0; i < g.gl_pathc; ++i) {
        const std::string p = g.gl_pathv[i];
        const std::string name = std::filesystem::path(p).filename().string();
        struct stat st {};
        if (::stat(p.c_str(), &st) != 0 || !S_ISREG(st.st_mode)) continue;
        if (name.ends_with(".tmp")) continue;  // a writer's unfinished file
        if (opts.training_only && name.find("training") == std::string::npos) {
          not_training.insert({st.st_dev, st.st_ino});
          continue;
        }
        found.push_back({p, st.st_dev, st.st_ino});
      }
    }
    globfree(&g);
  }
  std::sort(found.begin(), found.end(), [](const Found& a, const Found& b) { return a.path < b.path; });
  std::set<std::pair<dev_t, ino_t>> seen;
  out->clear();
  for (const Found& f : found)
    if (seen.insert({f.dev, f.ino}).second) out->push_back(f);
  if (out->empty() && !not_training.empty())  // files there, none taken: the rule, not the files, is the surprise
    return Status::invalid_argument(fmt::format(
        "{} {} {}, none with 'training' in its name: NVIDIA's rule for its training files (format hdf5) keeps only "
        "those", not_training.size(), not_training.size() == 1 ? "file matches" : "files match",
        fmt::join(patterns, " ")));
  if (out->empty()) return Status::not_found(fmt::format("no shard files match {}", fmt::join(patterns, " ")));
  return Status::ok();
}
}  // namespace

Status ShardSet::open(const std::vector<std::string>& patterns, const ShardSetOptions& opts,
                      std::unique_ptr<ShardSet>* out) {
  return open_sources({patterns}, opts, out);
}

Status ShardSet::open_sources(const std::vector<std::vector<std::string>>& sources, const ShardSetOptions& opts,
                              std::unique_ptr<ShardSet>* out, const std::string& name) {
  std::vector<std::string> paths;
  std::vector<size_t> files_per_source;
  // A file in two sources would be blended at two weights: surely a glob too wide.
  std::map<std::pair<dev_t, ino_t>, size_t> source_of;
  for (size_t s = 0; s < sources.size(); ++s) {
    std::vector<Found> found;
    LB_RETURN_IF_ERROR(collect_files(sources[s], opts, &found));
    for (const Found& f : found) {
      const auto [it, fresh] = source_of.insert({{f.dev, f.ino}, s});
      if (!fresh)
        return Status::invalid_argument(fmt::format(
            "{}: in {}[{}] ({}) and in {}[{}] ({}): {} must not share files", f.path, name, it->second,
            fmt::join(sources[it->second], " "), name, s, fmt::join(sources[s], " "),
            name == "data.eval" || name == "--data" ? "held-out sets" : "a blend's sources"));
      paths.push_back(f.path);
    }
    files_per_source.push_back(found.size());
  }
  auto set = std::make_unique<ShardSet>();
  if (opts.token_limit > 0) set->token_limit_ = opts.token_limit;
  set->token_limit_note_ = " (" + (opts.token_limit_source.empty() ? std::string("the vocabulary")
                                                                   : opts.token_limit_source) + ")";
  set->segment_limit_ = opts.segment_limit;
  std::string info_path;  // the shard set->info_ came from
  for (const auto& p : paths) {
    std::unique_ptr<ShardReader> r;
    LB_RETURN_IF_ERROR(open_shard(p, &r, opts.format));
    if (!set->shards_.empty()) {
      const ShardReader& first = *set->shards_.front();
      if (r->seq_len() != first.seq_len() || r->max_pred() != first.max_pred() ||
          r->dynamic_masking() != first.dynamic_masking()) {
        return Status::invalid_argument(fmt::format(
            "{}: seq_len {} / max_pred {} / dynamic masking {} differ from {} ({} / {} / {})", p,
            r->seq_len(), r->max_pred(), r->dynamic_masking(), first.path(), first.seq_len(),
            first.max_pred(), first.dynamic_masking()));
      }
    }
    auto* lb = dynamic_cast<LbShardReader*>(r.get());
    if (!lb) set->all_whole_word_ = false;  // HDF5 records no masking mode
    if (lb != nullptr) {
      if (opts.vocab_hash && *opts.vocab_hash != lb->info().vocab_hash)
        return Status::invalid_argument(fmt::format(
            "{}: vocabulary mismatch: the shard was made with a vocab of hash {} ({} tokens), {} has hash {}: the "
            "ids would mean other tokens; make the shards with `lansbert prep --vocab` of that file",
            p, vocab_hash_text(lb->info().vocab_hash), lb->info().vocab_size,
            opts.vocab_source.empty() ? std::string("this run's vocab") : opts.vocab_source,
            vocab_hash_text(*opts.vocab_hash)));
      // The ids of shards made with two vocabularies mean two things. Unmasked (dynamic) shards
      // are masked at load time by the first one's settings (ShardSet::info), so those must
      // hold for all; masked ones carry their masks, whatever made them.
      if (set->info_ && (lb->info().vocab_hash != set->info_->vocab_hash ||
                         lb->info().vocab_size != set->info_->vocab_size))
        return Status::invalid_argument(fmt::format(
            "{}: made with another vocabulary (hash {}, {} tokens) than {} (hash {}, {} tokens): one "
            "run reads shards of one vocabulary; make them again with `lansbert prep --vocab` of the same file",
            p, vocab_hash_text(lb->info().vocab_hash), lb->info().vocab_size, info_path, vocab_hash_text(set->info_->vocab_hash),
            set->info_->vocab_size));
      if (set->info_ && lb->dynamic_masking() &&
          (lb->info().whole_word != set->info_->whole_word ||
           lb->info().masked_lm_prob != set->info_->masked_lm_prob))
        return Status::invalid_argument(fmt::format(
            "{}: masked at load time with whole-word masking {} and probability {} where {} says {} and {}: one "
            "set of unmasked shards is masked one way; make them with the same --whole-word and --masked-lm-prob",
            p, lb->info().whole_word ? "on" : "off",
            lb->info().masked_lm_prob, info_path, set->info_->whole_word ? "on" : "off", set->info_->masked_lm_prob));
      set->all_whole_word_ = set->all_whole_word_ && lb->info().whole_word;
      if (!set->info_) {
        set->info_ = lb->info();
        info_path = p;
      }
      set->token_limit_ = std::min(set->token_limit_, lb->info().vocab_size);
    }
    set->offsets_.push_back(set->offsets_.back() + r->count());
    set->shards_.push_back(std::move(r));
  }
  for (size_t s = 0, first = 0; s < files_per_source.size(); first += files_per_source[s], ++s)
    set->source_sizes_.push_back(set->offsets_[first + files_per_source[s]] - set->offsets_[first]);
  *out = std::move(set);
  return Status::ok();
}

Status ShardSet::sample_digest(uint32_t* out) { return sample_digest(0, count(), out); }

Status ShardSet::sample_digest(int64_t begin, int64_t end, uint32_t* out) {
  LB_CHECK(begin >= 0 && begin <= end && end <= count());
  *out = 0;
  if (begin == end) return Status::ok();  // nothing to read (an HDF5 shard may hold no sample)
  Batch b;
  b.resize(1, seq_len(), max_pred());
  uint32_t crc = 0;
  for (int64_t i : {begin, begin + (end - begin) / 2, end - 1}) {
    LB_RETURN_IF_ERROR(read(i, &b, 0));
    for (const std::vector<int32_t>* v :
         {&b.input_ids, &b.segment_ids, &b.input_mask, &b.masked_positions, &b.masked_ids, &b.nsp_labels})
      crc = crc32c(v->data(), v->size() * sizeof(int32_t), crc);
  }
  *out = crc;
  return Status::ok();
}

Status ShardSet::source_digests(std::vector<uint32_t>* out) {
  out->clear();
  int64_t begin = 0;
  for (const int64_t size : source_sizes_) {
    out->emplace_back();
    LB_RETURN_IF_ERROR(sample_digest(begin, begin + size, &out->back()));
    begin += size;
  }
  return Status::ok();
}

size_t ShardSet::shard_of(int64_t index) const {
  LB_CHECK(index >= 0 && index < count());
  return static_cast<size_t>(std::upper_bound(offsets_.begin(), offsets_.end(), index) - offsets_.begin()) - 1;
}

std::string ShardSet::where(int64_t index) const {
  const size_t s = shard_of(index);
  return fmt::format("{}: sample {}", shards_[s]->path(), index - offsets_[s]);
}

Status ShardSet::read(int64_t index, Batch* batch, int row) {
  const size_t s = shard_of(index);
  LB_RETURN_IF_ERROR(shards_[s]->read(index - offsets_[s], batch, row));
  return check_row(*shards_[s], index - offsets_[s], *batch, row);
}

Status ShardSet::check_row(const ShardReader& shard, int64_t local, const Batch& b, int row) const {
  const int S = b.seq_len, P = b.max_pred;
  auto bad = [&](const char* field, int i, int64_t v, int64_t limit, const char* what = "") {
    return Status::corrupt(fmt::format("{}: sample {}: {}[{}] = {} is outside [0, {}){}", shard.path(), local,
                                       field, i, v, limit, what));
  };
  const int32_t* ids = b.input_ids.data() + size_t(row) * S;
  const int32_t* seg = b.segment_ids.data() + size_t(row) * S;
  for (int i = 0; i < S; ++i) {
    if (ids[i] < 0 || ids[i] >= token_limit_)
      return bad("input_ids", i, ids[i], token_limit_, token_limit_note_.c_str());
    if (seg[i] < 0 || seg[i] >= segment_limit_)
      return bad("segment_ids", i, seg[i], segment_limit_, " (the model's token types)");
  }
  const int32_t* pos = b.masked_positions.data() + size_t(row) * P;
  const int32_t* orig = b.masked_ids.data() + size_t(row) * P;
  for (int k = 0; k < P; ++k) {
    if (orig[k] == Batch::kIgnore) continue;
    if (orig[k] < 0 || orig[k] >= token_limit_)
      return bad("masked_lm_ids", k, orig[k], token_limit_, token_limit_note_.c_str());
    if (pos[k] < 0 || pos[k] >= S) return bad("masked_lm_positions", k, pos[k], S);
  }
  const int32_t nsp = b.nsp_labels[row];
  if (nsp != 0 && nsp != 1) return bad("next_sentence_labels", 0, nsp, 2);
  return Status::ok();
}

}  // namespace lansbert
