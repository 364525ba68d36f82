// prep's held-out split: the document split, the pooled held-out instances and the order of
// the two output directories (heldout_split.h).
#include "heldout_split.h"

#include <fmt/format.h>
#include <sys/stat.h>

#include <algorithm>
#include <filesystem>

namespace lansbert {

void split_heldout(double fraction, uint64_t first_doc, std::vector<Document>* docs, std::vector<uint64_t>* kept_index,
                   std::vector<Document>* held, std::vector<uint64_t>* held_index) {
  kept_index->clear();
  held->clear();
  held_index->clear();
  size_t kept = 0;
  for (size_t d = 0; d < docs->size(); ++d) {
    Document& doc = (*docs)[d];
    if (fraction > 0 && heldout_document(doc, fraction)) {
      held->push_back(std::move(doc));
      held_index->push_back(first_doc + d);
      continue;
    }
    if (kept != d) (*docs)[kept] = std::move(doc);
    kept_index->push_back(first_doc + d);
    ++kept;
  }
  docs->resize(kept);
}

InstanceOptions heldout_instance_options(InstanceOptions training) {
  training.dupe_factor = 1;
  training.dynamic_masking = false;
  return training;
}

HeldoutPool::HeldoutPool(const InstanceOptions& io, const MaskingVocab& vocab, int threads, ShardSink* sink,
                         PrepStats* stats)
    : io_(io), vocab_(vocab), threads_(threads), sink_(sink), stats_(stats) {}

Status HeldoutPool::add(Document doc, uint64_t index) {
  for (const auto& sentence : doc) new_tokens_ += static_cast<int64_t>(sentence.size());
  docs_.push_back(std::move(doc));
  index_.push_back(index);
  ++stats_->heldout_documents;
  if (docs_.size() - carried_ >= kDocuments || new_tokens_ >= kTokens) return flush();
  return Status::ok();
}

Status HeldoutPool::flush() {
  if (docs_.size() == carried_) return Status::ok();
  LB_RETURN_IF_ERROR(write_instances(docs_, index_, carried_, 0, io_, vocab_, threads_, sink_, &scratch_,
                                     &stats_->heldout_instances, &stats_->heldout_instance_tokens));
  const size_t keep = std::min(kDocuments, docs_.size());
  docs_.erase(docs_.begin(), docs_.end() - static_cast<std::ptrdiff_t>(keep));
  index_.erase(index_.begin(), index_.end() - static_cast<std::ptrdiff_t>(keep));
  carried_ = keep;
  new_tokens_ = 0;
  return Status::ok();
}

std::filesystem::path resolved_directory(const std::string& dir) {
  namespace fs = std::filesystem;
  // Absolute first: weakly_canonical leaves a relative path that does not exist as it is
  // ("./a" and "a" would differ).
  std::error_code e;
  fs::path p = fs::weakly_canonical(fs::absolute(dir), e);
  if (e) p = fs::absolute(dir).lexically_normal();
  return p.has_filename() ? p : p.parent_path();  // "shards/" as "shards"
}

bool heldout_dir_is_outer(const std::string& out_dir, const std::string& heldout_dir) {
  namespace fs = std::filesystem;
  const fs::path out = resolved_directory(out_dir), held = resolved_directory(heldout_dir);
  const auto [h, o] = std::mismatch(held.begin(), held.end(), out.begin(), out.end());
  return h == held.end() && o != out.end();  // every component of held begins out, which goes on
}

Status check_distinct_directories(const std::string& out_dir, const std::string& heldout_dir) {
  struct stat a {}, b {};
  if (::stat(out_dir.c_str(), &a) != 0 || ::stat(heldout_dir.c_str(), &b) != 0) return Status::ok();
  if (a.st_dev != b.st_dev || a.st_ino != b.st_ino) return Status::ok();
  return Status::invalid_argument(fmt::format(
      "prep: --heldout-out {}: is the --out directory ({}); give the held-out set its own", heldout_dir, out_dir));
}

}  // namespace lansbert
