// check_prep_options: everything about a prep run that can be wrong before any work starts.
// It runs before the output directory is touched, so a typo in a flag or a missing input
// fails in milliseconds with the option or file named, instead of after (or in the middle
// of) the run. NaN fails every range test: each test is written as "!(in range)".
#include <fcntl.h>
#include <fmt/format.h>
#include <omp.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "lansbert/data/minhash.h"
#include "lansbert/data/prep.h"
#include "heldout_split.h"

namespace lansbert {
namespace {

Status bad(const std::string& m) { return Status::invalid_argument("prep: " + m); }

// An input must be a regular file (a directory or a device is a mistake, not a corpus) that
// this process can open for reading, or "-" for stdin when it is open and neither a directory
// nor a terminal. Adds a file's size to *total (stdin's is counted by the reader).
Status check_input(const std::string& path, uint64_t* total) {
  if (path == "-") {
    struct stat st {};
    if (::fstat(STDIN_FILENO, &st) != 0) return bad("--input -: stdin is closed");
    if (S_ISDIR(st.st_mode)) return bad("--input -: stdin is a directory");
    if (::isatty(STDIN_FILENO) == 1)
      return bad("--input -: stdin is a terminal; pipe the corpus in (e.g. lbzip2 -dc dump.xml.bz2 | lansbert prep "
                 "--input - --input-format mediawiki ...)");
    return Status::ok();
  }
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) {
    const std::string why = std::strerror(errno);
    if (errno == ENOENT || errno == ENOTDIR) return Status::not_found(fmt::format("{}: cannot read input: {}", path, why));
    return Status::io_error(fmt::format("{}: cannot read input: {}", path, why));
  }
  if (S_ISDIR(st.st_mode)) {
    return bad(fmt::format("--input {}: is a directory; give the text files (e.g. {}/*.txt)", path, path));
  }
  if (!S_ISREG(st.st_mode)) return bad(fmt::format("--input {}: not a regular file", path));
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return Status::io_error(fmt::format("{}: cannot open input: {}", path, std::strerror(errno)));
  ::close(fd);
  *total += static_cast<uint64_t>(st.st_size);
  return Status::ok();
}

// The held-out directory: not a file, and not --out itself (whose shards it would replace;
// a directory inside --out is fine: data.train's `--out/*.lbs` does not reach into it).
Status check_heldout(const PrepOptions& opts) {
  if (opts.heldout_dir.empty()) return Status::ok();
  if (!(opts.heldout_fraction > 0 && opts.heldout_fraction < 1)) {
    return bad(fmt::format("--heldout-fraction {}: must be more than 0 and less than 1", opts.heldout_fraction));
  }
  struct stat st {};
  if (::stat(opts.heldout_dir.c_str(), &st) == 0 && !S_ISDIR(st.st_mode)) {
    return bad(fmt::format("--heldout-out {}: exists and is not a directory", opts.heldout_dir));
  }
  if (resolved_directory(opts.out_dir) == resolved_directory(opts.heldout_dir)) {
    return bad(fmt::format("--heldout-out {}: is the --out directory ({}); give the held-out set its own", opts.heldout_dir,
                           opts.out_dir));
  }
  return Status::ok();
}

}  // namespace

Status check_prep_options(const PrepOptions& opts) {
  const InstanceOptions& io = opts.instances;
  // Shards store lengths and positions as u16 (docs/data-format.md); BERT needs room for
  // [CLS] A [SEP] B [SEP] with A and B non-empty and a target length of at least 2.
  if (!(io.max_seq_len >= 8 && io.max_seq_len <= 65535)) {
    return bad(fmt::format("--seq-len {}: must be in [8, 65535]", io.max_seq_len));
  }
  if (!(io.max_pred >= 1 && io.max_pred <= io.max_seq_len)) {
    return bad(fmt::format("--max-pred {}: must be in [1, --seq-len = {}]", io.max_pred, io.max_seq_len));
  }
  if (!(io.dupe_factor >= 1 && io.dupe_factor <= kMaxDupeFactor)) {
    return bad(fmt::format("--dupe-factor {}: must be in [1, {}]", io.dupe_factor, kMaxDupeFactor));
  }
  if (!(io.masked_lm_prob > 0 && io.masked_lm_prob < 1)) {
    return bad(fmt::format("--masked-lm-prob {}: must be more than 0 and less than 1", io.masked_lm_prob));
  }
  if (!(io.short_seq_prob >= 0 && io.short_seq_prob <= 1)) {
    return bad(fmt::format("--short-seq-prob {}: must be in [0, 1]", io.short_seq_prob));
  }
  if (!(opts.shard_size >= 1)) return bad(fmt::format("--shard-size {}: must be at least 1", opts.shard_size));
  if (!(opts.block_bytes >= 1 && opts.block_bytes <= kMaxPrepBlockBytes)) {
    return bad(fmt::format("--block-mb: a block of {} bytes is out of range: it must hold 1 byte to {} MB",
                           opts.block_bytes, kMaxPrepBlockBytes >> 20));
  }
  if (!(opts.threads >= 0 && opts.threads <= kMaxPrepThreads)) {
    return bad(fmt::format("--threads {}: must be in [0, {}] (0 = OpenMP's default, one per core)",
                           opts.threads, kMaxPrepThreads));
  }
  if (opts.threads == 0 && omp_get_max_threads() > kMaxPrepThreads) {
    return bad(fmt::format("--threads 0 means OpenMP's default, {} here (OMP_NUM_THREADS?), more than "
                           "the {} prep allows: give --threads", omp_get_max_threads(), kMaxPrepThreads));
  }
  if (opts.near_dedup != 0 &&
      !(opts.near_dedup >= LshPlan::kMinThreshold && opts.near_dedup <= LshPlan::kMaxThreshold)) {
    return bad(fmt::format("--near-dedup {}: must be a Jaccard similarity in [{}, {}] (0.8 is usual)",
                           opts.near_dedup, LshPlan::kMinThreshold, LshPlan::kMaxThreshold));
  }
  if (opts.out_dir.empty()) return bad("--out: empty path");
  struct stat st {};
  if (::stat(opts.out_dir.c_str(), &st) == 0 && !S_ISDIR(st.st_mode)) {
    return bad(fmt::format("--out {}: exists and is not a directory", opts.out_dir));
  }
  LB_RETURN_IF_ERROR(check_heldout(opts));
  LB_RETURN_IF_ERROR(check_corpus_options(opts.corpus).with_prefix("prep: "));
  if (opts.inputs.empty()) return bad("--input: no input files");
  uint64_t total = 0;
  for (const auto& p : opts.inputs) LB_RETURN_IF_ERROR(check_input(p, &total));
  const auto stdins = std::count(opts.inputs.begin(), opts.inputs.end(), "-");
  if (stdins > 1) return bad("--input: '-' (stdin) given more than once");
  if (total == 0 && stdins == 0) {
    return bad(fmt::format("--input: the input files are empty ({}{})", opts.inputs.front(),
                           opts.inputs.size() > 1 ? ", ..." : ""));
  }
  return Status::ok();
}

}  // namespace lansbert
