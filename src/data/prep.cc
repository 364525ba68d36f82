// run_prep: the streaming block loop, the shard rotation and the progress line. The next
// block is read on a thread of its own (block_reader.h) while the current one is tokenized,
// made into instances and written.
#include "lansbert/data/prep.h"

#include <fmt/format.h>
#include <omp.h>

#include <chrono>
#include <cstdio>
#include <memory>

#include <unistd.h>

#include "block_reader.h"
#include "shard_staging.h"

namespace lansbert {
namespace {

using Clock = std::chrono::steady_clock;

// Shard files numbered in creation order; a new one is opened when the current is full.
class ShardSink {
 public:
  ShardSink(const PrepOptions& opts, std::string dir, const ShardInfo& info)
      : opts_(opts), dir_(std::move(dir)), info_(info) {}
  Status add(const Instance& inst) {
    if (writer_ && writer_->count() >= opts_.shard_size) LB_RETURN_IF_ERROR(close());
    if (!writer_) {
      const std::string path = fmt::format("{}/shard-{:05d}.lbs", dir_, shards_);
      LB_RETURN_IF_ERROR(ShardWriter::create(path, info_, &writer_));
    }
    return writer_->add(inst);
  }
  Status close() {
    if (!writer_) return Status::ok();
    LB_RETURN_IF_ERROR(writer_->finish());
    writer_.reset();
    ++shards_;
    return Status::ok();
  }
  int64_t shards() const { return shards_ + (writer_ ? 1 : 0); }

 private:
  const PrepOptions& opts_;
  std::string dir_;
  ShardInfo info_;
  std::unique_ptr<ShardWriter> writer_;
  int64_t shards_ = 0;
};

// Tokenizes the block in parallel and builds its documents (empty sentences and documents
// dropped). The first error in input order is returned, whatever the thread count.
Status tokenize_block(const RawBlock& raw, const TokenizeFn& tokenize, int threads,
                      std::vector<Document>* docs, PrepStats* stats) {
  const int64_t n = static_cast<int64_t>(raw.sentences.size());
  std::vector<std::vector<int32_t>> ids(n);
  std::vector<Status> errors(n);
#pragma omp parallel for schedule(dynamic, 64) num_threads(threads)
  for (int64_t i = 0; i < n; ++i) errors[i] = tokenize(raw.sentences[i], &ids[i]);
  for (int64_t i = 0; i < n; ++i) {
    if (!errors[i].is_ok()) {
      return errors[i].with_prefix(raw.origins[i] + ": ");
    }
  }
  docs->clear();
  for (size_t d = 0; d + 1 < raw.doc_begin.size(); ++d) {
    Document doc;
    for (size_t i = raw.doc_begin[d]; i < raw.doc_begin[d + 1]; ++i) {
      if (ids[i].empty()) continue;
      stats->tokens += static_cast<int64_t>(ids[i].size());
      doc.push_back(std::move(ids[i]));
    }
    stats->sentences += static_cast<int64_t>(doc.size());
    if (!doc.empty()) docs->push_back(std::move(doc));
  }
  return Status::ok();
}

// On a terminal one line redrawn twice a second; into a file or a job log (stderr not a
// terminal) a whole line every 30 s, so that the log reads line by line and stays small.
bool progress_on_terminal() {
  static const bool tty = ::isatty(::fileno(stderr)) == 1;
  return tty;
}

// `bytes_read` is where the reader was after the block last made (it may be reading ahead).
// With stdin among the inputs the total is not known: no share and no ETA.
void print_progress(uint64_t bytes_read, const BlockReader& reader, const PrepStats& st,
                    Clock::time_point t0, bool final) {
  const double sec = std::chrono::duration<double>(Clock::now() - t0).count();
  const double mb = bytes_read / 1e6, total = reader.total_bytes() / 1e6;
  const double rate = sec > 0 ? mb / sec : 0;
  const double eta = rate > 0 ? (total - mb) / rate : 0;
  const bool tty = progress_on_terminal();
  const std::string where =
      reader.total_known()
          ? fmt::format("{:.1f}/{:.1f} MB ({:3.0f}%) {:.2f} MB/s ETA {}:{:02d}", mb, total,
                        total > 0 ? 100 * mb / total : 100.0, rate, int(eta) / 60, int(eta) % 60)
          : fmt::format("{:.1f} MB {:.2f} MB/s", mb, rate);
  std::fprintf(stderr, "%sprep: %s, %lld documents, %lld instances, %lld shards%s", tty ? "\r" : "", where.c_str(),
               static_cast<long long>(st.documents), static_cast<long long>(st.instances),
               static_cast<long long>(st.shards), final || !tty ? "\n" : "");
}

}  // namespace

Status run_prep(const PrepOptions& opts, const ShardInfo& base, const MaskingVocab& vocab,
                const TokenizeFn& tokenize, PrepStats* stats) {
  LB_RETURN_IF_ERROR(check_prep_options(opts));
  const InstanceOptions& io = opts.instances;
  ShardInfo info = base;
  // The ids come from `vocab`: its size bounds them, sets the shards' id width, and is what
  // the header records.
  info.vocab_size = vocab.vocab_size;
  info.seq_len = io.max_seq_len;
  info.max_pred = io.max_pred;
  info.seed = io.seed;
  info.dupe_factor = io.dupe_factor;
  info.masked_lm_prob = io.masked_lm_prob;
  info.short_seq_prob = io.short_seq_prob;
  info.whole_word = io.whole_word;
  info.dynamic_masking = io.dynamic_masking;
  // The new shards replace the old ones only once the whole run has succeeded.
  ShardStaging staging;
  LB_RETURN_IF_ERROR(staging.open(opts.out_dir));
  ShardSink sink(opts, staging.dir(), info);
  const int threads = opts.threads > 0 ? opts.threads : omp_get_max_threads();
  const auto t0 = Clock::now();
  auto last_print = t0;
  *stats = PrepStats{};
  uint64_t first_doc = 0, bytes_read = 0;
  std::vector<Document> docs;
  std::vector<Instance> instances;
  // Last: on an early return it is destroyed first, leaving a read in flight to its thread.
  BlockReader reader;
  LB_RETURN_IF_ERROR(reader.open(opts.inputs, opts.corpus, opts.block_bytes, opts.stop, opts.out_dir));
  // A signal first: Ctrl-C at a pipe's writer cuts the input short (or mid-character) as it
  // stops prep, and the run was stopped rather than fed bad input.
  const auto failed = [&opts](const Status& s) {
    const Status stop = check_stop(opts.stop, opts.out_dir);
    return stop.is_ok() ? s : stop;
  };
  for (bool last = false; !last;) {
    std::unique_ptr<RawBlock> block;
    if (const Status read = reader.next(&block); !read.is_ok()) return failed(read);
    if (!block || block->sentences.empty()) break;
    const RawBlock& raw = *block;
    bytes_read = raw.bytes_read;
    last = raw.last;
    if (const Status s = tokenize_block(raw, tokenize, threads, &docs, stats); !s.is_ok()) return failed(s);
    LB_RETURN_IF_ERROR(check_stop(opts.stop, opts.out_dir));
    block.reset();  // free the text before the instances grow
    for (int pass = 0; pass < io.dupe_factor; ++pass) {
      instances.clear();
      create_instances(docs, first_doc, pass, io, vocab, threads, &instances);
      LB_RETURN_IF_ERROR(check_stop(opts.stop, opts.out_dir));
      for (const auto& inst : instances) {
        LB_RETURN_IF_ERROR(sink.add(inst));
        stats->instance_tokens += static_cast<int64_t>(inst.tokens.size());
      }
      stats->instances += static_cast<int64_t>(instances.size());
    }
    first_doc += docs.size();
    stats->documents += static_cast<int64_t>(docs.size());
    stats->shards = sink.shards();
    if (opts.progress &&
        Clock::now() - last_print > std::chrono::milliseconds(progress_on_terminal() ? 500 : 30000)) {
      print_progress(bytes_read, reader, *stats, t0, false);
      last_print = Clock::now();
    }
  }
  LB_RETURN_IF_ERROR(check_stop(opts.stop, opts.out_dir));
  LB_RETURN_IF_ERROR(sink.close());
  stats->shards = sink.shards();
  stats->bytes = reader.bytes_read();
  stats->seconds = std::chrono::duration<double>(Clock::now() - t0).count();
  if (opts.progress) print_progress(stats->bytes, reader, *stats, t0, true);
  if (stats->instances == 0) {
    return Status::invalid_argument("prep: the input produced no instances (empty input?)");
  }
  return staging.commit(stats->shards);
}

}  // namespace lansbert
