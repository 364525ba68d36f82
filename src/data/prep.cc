// run_prep: the streaming block loop, the shard rotation and the progress line. The next
// block is read on a thread of its own (block_reader.h) while the current one is tokenized,
// made into instances and written.
#include "lansbert/data/prep.h"

#include <fmt/format.h>
#include <omp.h>

#include <chrono>
#include <cstdio>
#include <memory>
#include <optional>
#include <span>

#include <unistd.h>

#include "block_reader.h"
#include "drop_in_order.h"
#include "hash_mix.h"
#include "heldout_split.h"
#include "near_duplicates.h"
#include "seen_documents.h"
#include "shard_sink.h"
#include "shard_staging.h"

namespace lansbert {
namespace {

using Clock = std::chrono::steady_clock;

// Tokenizes the block in parallel and builds its documents (empty sentences and documents
// dropped). The first error in input order is returned, whatever the thread count.
Status tokenize_block(const RawBlock& raw, const TokenizeFn& tokenize, int threads,
                      std::vector<Document>* docs) {
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
      if (!ids[i].empty()) doc.push_back(std::move(ids[i]));
    }
    if (!doc.empty()) docs->push_back(std::move(doc));
  }
  return Status::ok();
}

// --dedup: drops from *docs, in order, each document whose hash *seen holds (an earlier one's,
// in this block or before); returns how many.
int64_t drop_duplicates(std::vector<Document>* docs, SeenDocuments* seen) {
  return drop_in_order(docs, [seen](size_t, const Document& doc) { return !seen->insert(document_hash(doc)); });
}

// The documents, their sentences and tokens, and the one-sentence ones into *stats (after
// --dedup, before the held-out split: the counts are of every document kept).
void count_documents(std::span<const Document> docs, PrepStats* stats) {
  stats->documents += static_cast<int64_t>(docs.size());
  for (const Document& doc : docs) {
    stats->sentences += static_cast<int64_t>(doc.size());
    stats->single_sentence_documents += doc.size() == 1;
    for (const auto& sentence : doc) stats->tokens += static_cast<int64_t>(sentence.size());
  }
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

// The header of the shards made with `io`: `base` gives the vocab identity and special ids, and
// the ids come from `vocab`, whose size bounds them and sets the shards' id width.
ShardInfo shard_info_for(const ShardInfo& base, const MaskingVocab& vocab, const InstanceOptions& io) {
  ShardInfo info = base;
  info.vocab_size = vocab.vocab_size;
  info.seq_len = io.max_seq_len;
  info.max_pred = io.max_pred;
  info.seed = io.seed;
  info.dupe_factor = io.dupe_factor;
  info.masked_lm_prob = io.masked_lm_prob;
  info.short_seq_prob = io.short_seq_prob;
  info.whole_word = io.whole_word;
  info.dynamic_masking = io.dynamic_masking;
  return info;
}

}  // namespace

Status run_prep(const PrepOptions& opts, const ShardInfo& base, const MaskingVocab& vocab,
                const TokenizeFn& tokenize, PrepStats* stats) {
  LB_RETURN_IF_ERROR(check_prep_options(opts));
  const InstanceOptions& io = opts.instances;
  const ShardInfo info = shard_info_for(base, vocab, io);
  // The new shards replace the old ones only once the whole run has succeeded. With a held-out
  // set, two directories: the outer one (when one lies in the other) is opened first and
  // closed last (heldout_split.h).
  const bool split = !opts.heldout_dir.empty();
  const bool held_outer = split && heldout_dir_is_outer(opts.out_dir, opts.heldout_dir);
  ShardStaging opened_first, opened_second;  // destroyed in reverse order
  ShardStaging& staging = held_outer ? opened_second : opened_first;
  ShardStaging& held_staging = held_outer ? opened_first : opened_second;
  if (held_outer) {
    LB_RETURN_IF_ERROR(held_staging.open(opts.heldout_dir, "--heldout-out"));
    LB_RETURN_IF_ERROR(check_distinct_directories(opts.out_dir, opts.heldout_dir));
  }
  LB_RETURN_IF_ERROR(staging.open(opts.out_dir));
  if (split && !held_outer) {
    LB_RETURN_IF_ERROR(check_distinct_directories(opts.out_dir, opts.heldout_dir));
    LB_RETURN_IF_ERROR(held_staging.open(opts.heldout_dir, "--heldout-out"));
  }
  ShardSink sink(opts.shard_size, staging.dir(), info);
  const InstanceOptions held_io = heldout_instance_options(io);
  ShardSink held_sink(opts.shard_size, held_staging.dir(), shard_info_for(base, vocab, held_io));
  // What a signal leaves as it was.
  const std::string kept = split ? fmt::format("{} and {} are as they were before the run", opts.out_dir,
                                               opts.heldout_dir)
                                 : fmt::format("{} is as it was before the run", opts.out_dir);
  const int threads = opts.threads > 0 ? opts.threads : omp_get_max_threads();
  const auto t0 = Clock::now();
  auto last_print = t0;
  *stats = PrepStats{};
  uint64_t first_doc = 0, bytes_read = 0;
  std::vector<Document> docs, held;
  std::vector<uint64_t> index, held_index;
  std::vector<Instance> instances;
  SeenDocuments seen;
  std::optional<NearDuplicates> near;
  if (opts.near_dedup > 0) {
    near.emplace(opts.near_dedup, vocab.unk_id);
    stats->near_dedup_bands = near->plan().bands;
    stats->near_dedup_rows = near->plan().rows;
  }
  HeldoutPool held_pool(held_io, vocab, threads, &held_sink, stats);
  // Last: on an early return it is destroyed first, leaving a read in flight to its thread.
  BlockReader reader;
  LB_RETURN_IF_ERROR(reader.open(opts.inputs, opts.corpus, opts.block_bytes, opts.stop, kept));
  // A signal first: Ctrl-C at a pipe's writer cuts the input short (or mid-character) as it
  // stops prep, and the run was stopped rather than fed bad input.
  const auto failed = [&opts, &kept](const Status& s) {
    const Status stop = check_stop(opts.stop, kept);
    return stop.is_ok() ? s : stop;
  };
  for (bool last = false; !last;) {
    std::unique_ptr<RawBlock> block;
    if (const Status read = reader.next(&block); !read.is_ok()) return failed(read);
    if (!block || block->sentences.empty()) break;
    const RawBlock& raw = *block;
    bytes_read = raw.bytes_read;
    last = raw.last;
    if (const Status s = tokenize_block(raw, tokenize, threads, &docs); !s.is_ok()) return failed(s);
    LB_RETURN_IF_ERROR(check_stop(opts.stop, kept));
    block.reset();  // free the text before the instances grow
    if (opts.dedup) stats->duplicates += drop_duplicates(&docs, &seen);
    if (near) stats->near_duplicates += near->drop(&docs, threads);
    count_documents(docs, stats);
    const uint64_t block_docs = docs.size();
    split_heldout(split ? opts.heldout_fraction : 0.0, first_doc, &docs, &index, &held, &held_index);
    for (int pass = 0; pass < io.dupe_factor; ++pass) {
      LB_RETURN_IF_ERROR(write_instances(docs, index, 0, pass, io, vocab, threads, &sink, &instances, &stats->instances,
                                         &stats->instance_tokens));
      LB_RETURN_IF_ERROR(check_stop(opts.stop, kept));
    }
    for (size_t d = 0; d < held.size(); ++d) LB_RETURN_IF_ERROR(held_pool.add(std::move(held[d]), held_index[d]));
    first_doc += block_docs;
    stats->shards = sink.shards();
    if (opts.progress &&
        Clock::now() - last_print > std::chrono::milliseconds(progress_on_terminal() ? 500 : 30000)) {
      print_progress(bytes_read, reader, *stats, t0, false);
      last_print = Clock::now();
    }
  }
  LB_RETURN_IF_ERROR(held_pool.flush());
  LB_RETURN_IF_ERROR(check_stop(opts.stop, kept));
  LB_RETURN_IF_ERROR(sink.close());
  LB_RETURN_IF_ERROR(held_sink.close());
  stats->shards = sink.shards();
  stats->heldout_shards = held_sink.shards();
  stats->bytes = reader.bytes_read();
  if (near) stats->near_dedup_bytes = near->bytes();
  stats->seconds = std::chrono::duration<double>(Clock::now() - t0).count();
  if (opts.progress) print_progress(stats->bytes, reader, *stats, t0, true);
  if (stats->instances == 0 && split && stats->documents > 0) {
    return Status::invalid_argument(fmt::format("prep: no training instances: --heldout-fraction {} held out {} of the {} "
                                                "documents",
                                                opts.heldout_fraction, stats->heldout_documents, stats->documents));
  }
  if (stats->instances == 0) return Status::invalid_argument("prep: the input produced no instances (empty input?)");
  if (split && stats->heldout_instances == 0) {
    return Status::invalid_argument(fmt::format(
        "prep: --heldout-fraction {} held out none of the {} documents: raise it, or leave out --heldout-out",
        opts.heldout_fraction, stats->documents));
  }
  if (split && stats->heldout_documents < 2) {  // its random B would come from itself
    return Status::invalid_argument(fmt::format(
        "prep: --heldout-fraction {} held out 1 of the {} documents; a held-out set needs 2 or more (a random next "
        "sentence comes from another held-out document): raise it, or leave out --heldout-out",
        opts.heldout_fraction, stats->documents));
  }
  // Renames only from here. The held-out set first: should the training shards' renames
  // then fail, the error says that the two directories no longer belong together.
  if (split) LB_RETURN_IF_ERROR(held_staging.commit(stats->heldout_shards));
  const Status committed = staging.commit(stats->shards);
  if (split && !committed.is_ok()) {
    return committed.with_prefix(fmt::format("prep: the held-out shards in {} are this run's, but the training shards "
                                             "in {} could not all be replaced; run prep again: ",
                                             opts.heldout_dir, opts.out_dir));
  }
  return committed;
}

uint64_t document_hash(const Document& doc) {
  // (sentence length, ids...) per sentence, the length's top bit set so that no id reads as one.
  uint64_t h = kHashSeed;
  for (const auto& sentence : doc) {
    h = hash_mix(h, sentence.size() | (uint64_t(1) << 63));
    for (const int32_t id : sentence) h = hash_mix(h, static_cast<uint32_t>(id));
  }
  return h;
}

bool heldout_document(const Document& doc, double fraction) {
  return static_cast<double>(document_hash(doc) >> 11) * 0x1p-53 < fraction;
}

}  // namespace lansbert
