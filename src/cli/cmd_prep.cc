// `lansbert prep`: text or JSON Lines to pretraining shards (docs/data-format.md). Loads the vocab,
// tokenizes with BertTokenizer and hands the rest to run_prep, which streams in bounded
// memory and gives the same bytes for a seed whatever the thread count.
#include <fmt/format.h>

#include <algorithm>
#include <charconv>
#include <cstdio>
#include <string>
#include <vector>

#include "commands.h"
#include "option_checks.h"
#include "lansbert/core/stop_signals.h"
#include "lansbert/data/minhash.h"
#include "lansbert/data/prep.h"
#include "lansbert/data/tokenizer.h"
#include "lansbert/data/vocab.h"

namespace lansbert::cli {

namespace {

// Above this share of one-sentence documents prep warns (the sample corpus's dictionary
// entries: none, each has its headword line; a text file with a blank line after every sentence: 100%).
constexpr double kSingleSentenceWarning = 0.5;

struct PrepArgs {
  std::string vocab;
  PrepOptions opts;
  double block_mb = 16;
  bool cased = false;
  bool heldout_fraction_given = false, heldout_out_given = false;
  std::string near_dedup_given;  // as typed: "" and 1e-400 read as 0, which means off
};

// --block-mb is a double (fractions help tests); it is checked before the conversion to
// bytes, which is undefined for NaN and for values past size_t (1e99 became 0 bytes, and
// prep then reported an empty input).
Status block_bytes(double mb, size_t* bytes) {
  constexpr double kMaxMb = double(kMaxPrepBlockBytes >> 20);
  if (!(mb * 1048576.0 >= 1.0 && mb <= kMaxMb)) {
    return Status::invalid_argument(
        fmt::format("prep: --block-mb {}: must be at least 1 byte (about 1e-6) and at most {}", mb, kMaxMb));
  }
  *bytes = static_cast<size_t>(mb * 1048576.0);
  return Status::ok();
}

Status run_prep_command(PrepArgs& a) {
  LB_RETURN_IF_ERROR(block_bytes(a.block_mb, &a.opts.block_bytes));
  if (a.heldout_out_given && a.opts.heldout_dir.empty()) return Status::invalid_argument("prep: --heldout-out: empty path");
  if (a.heldout_fraction_given && a.opts.heldout_dir.empty()) {
    return Status::invalid_argument("prep: --heldout-fraction needs --heldout-out, the directory for the held-out shards");
  }
  if (!a.near_dedup_given.empty() && a.opts.near_dedup == 0) {  // "0" too: leave the option out for none
    return Status::invalid_argument(fmt::format("prep: --near-dedup '{}': must be a Jaccard similarity in [{}, {}] "
                                                "(0.8 is usual)",
                                                a.near_dedup_given, LshPlan::kMinThreshold, LshPlan::kMaxThreshold));
  }
  LB_RETURN_IF_ERROR(check_prep_options(a.opts));  // before the vocab load: fail fast
  Vocab vocab;
  LB_RETURN_IF_ERROR(Vocab::load(a.vocab, &vocab));
  TokenizerOptions topts;
  topts.lower_case = !a.cased;
  const BertTokenizer tokenizer(vocab, topts);
  MaskingVocab mv;
  mv.cls_id = vocab.cls_id();
  mv.sep_id = vocab.sep_id();
  mv.mask_id = vocab.mask_id();
  mv.unk_id = vocab.unk_id();
  mv.vocab_size = vocab.size();
  mv.is_continuation = vocab.continuation_flags();
  const ShardInfo base = shard_info_of(vocab);
  PrepStats st;
  // Ctrl-C, a scheduler's SIGTERM or SIGUSR1 ends the run between documents with the staging
  // directory removed, instead of killing it mid-file with gigabytes left behind.
  const StopSignals stop_guard;
  a.opts.stop = stop_signal;
  LB_RETURN_IF_ERROR(run_prep(
      a.opts, base, mv,
      [&tokenizer](std::string_view text, std::vector<int32_t>* ids) { return tokenizer.encode(text, ids); },
      &st));
  std::printf("prep: %.1f MB in %.1f s (%.2f MB/s): %lld documents, %lld sentences, %lld tokens -> "
              "%lld instances in %lld shard%s under %s\n",
              st.bytes / 1e6, st.seconds, st.seconds > 0 ? st.bytes / 1e6 / st.seconds : 0.0,
              static_cast<long long>(st.documents), static_cast<long long>(st.sentences),
              static_cast<long long>(st.tokens), static_cast<long long>(st.instances),
              static_cast<long long>(st.shards), st.shards == 1 ? "" : "s", a.opts.out_dir.c_str());
  // How much of each sequence is text: training computes on the padding too.
  const double filled = 100.0 * double(st.instance_tokens) / (double(st.instances) * a.opts.instances.max_seq_len);
  std::printf("prep: the sequences are %.1f%% tokens (%.1f of %d positions on average), %.1f%% padding\n", filled,
              double(st.instance_tokens) / double(st.instances), a.opts.instances.max_seq_len, 100.0 - filled);
  if (a.opts.dedup) {
    std::printf("prep: --dedup dropped %lld exact duplicate%s of earlier documents (%.2f%% of the %lld read)\n",
                static_cast<long long>(st.duplicates), st.duplicates == 1 ? "" : "s",
                100.0 * double(st.duplicates) / double(st.documents + st.duplicates + st.near_duplicates),
                static_cast<long long>(st.documents + st.duplicates + st.near_duplicates));
  }
  if (a.opts.near_dedup > 0) {
    // The geometry's S-curve, so that the threshold's meaning is on the screen.
    const LshPlan plan{st.near_dedup_bands, st.near_dedup_rows};
    const int64_t read = st.documents + st.near_duplicates;
    const double j = a.opts.near_dedup, below = j - 0.1, above = std::min(1.0, j + 0.1);
    std::printf("prep: --near-dedup %g dropped %lld document%s near an earlier kept one (%.2f%% of the %lld %s); "
                "MinHash of %d-token shingles, %d band%s of %d: a document of Jaccard similarity %.2f, %.2f, %.2f to "
                "a kept one is dropped with probability %.2f, %.2f, %.2f; band tables %.1f MB\n",
                j, static_cast<long long>(st.near_duplicates), st.near_duplicates == 1 ? "" : "s",
                100.0 * double(st.near_duplicates) / double(read), static_cast<long long>(read),
                a.opts.dedup ? "left by --dedup" : "read", kShingleTokens, plan.bands, plan.bands == 1 ? "" : "s",
                plan.rows, below, j, above, plan.drop_probability(below), plan.drop_probability(j),
                plan.drop_probability(above), st.near_dedup_bytes / 1e6);
  }
  if (!a.opts.heldout_dir.empty()) {
    std::printf("prep: held out %lld of the %lld documents (%.2f%%) -> %lld instances in %lld shard%s under %s "
                "(masked, one pass: for data.eval)\n",
                static_cast<long long>(st.heldout_documents), static_cast<long long>(st.documents),
                100.0 * double(st.heldout_documents) / double(st.documents),
                static_cast<long long>(st.heldout_instances), static_cast<long long>(st.heldout_shards),
                st.heldout_shards == 1 ? "" : "s", a.opts.heldout_dir.c_str());
  }
  // Next-sentence prediction needs documents of several sentences: with one, B is always random.
  const double single = st.documents ? double(st.single_sentence_documents) / double(st.documents) : 0.0;
  if (single > kSingleSentenceWarning) {
    std::fflush(stdout);  // after the summary above, in a terminal or a log that takes both
    std::fprintf(stderr,
                 "prep: warning: %.1f%% of the %lld documents are a single sentence, and every instance of such a "
                 "document takes a random sentence B: next-sentence prediction learns little from them. A blank line "
                 "ends a document in text input: put one between documents, not between sentences; a JSON Lines "
                 "record, an article or a book is one document, so a dataset of one sentence per record in reading "
                 "order needs --records-per-document (e.g. 64)\n",
                 100.0 * single, static_cast<long long>(st.documents));
  }
  return Status::ok();
}

}  // namespace

void add_prep_command(CLI::App& app) {
  auto args = std::make_shared<PrepArgs>();
  PrepOptions& o = args->opts;
  InstanceOptions& io = o.instances;
  CLI::App* sub = app.add_subcommand(
      "prep", "Turn text (one sentence or paragraph per line, blank line between documents), JSON Lines "
              "(a document per record), a MediaWiki XML dump (a document per article) or books (a document per file), "
              "plain or compressed "
              "(gzip, zstd, bzip2), into pretraining shards");
  sub->add_option("--vocab", args->vocab, "WordPiece vocab.txt")->required();
  sub->add_option("--input", o.inputs,
                  "Text, JSON Lines or MediaWiki XML files, plain, gzip, Zstandard or bzip2 ('-': stdin, once)")
      ->required();
  sub->add_option("--input-format", o.corpus.format,
                  "auto (jsonl for *.jsonl, *.ndjson and *.json, mediawiki for *.xml and Wikipedia's *.xml-pNpM, before "
                  "any .gz, .zst or .bz2; text otherwise), text, jsonl, mediawiki (Wikipedia's XML dumps) or book (each file one "
                  "document: a plain-text book, Project Gutenberg's licence and headings dropped)")
      ->capture_default_str();
  sub->add_option("--json-key", o.corpus.json_key, "The field of each JSON Lines record that holds its document")
      ->capture_default_str();
  sub->add_option("--records-per-document", o.corpus.records_per_document,
                  "JSON Lines: N consecutive records make one document (a dataset of one sentence per record in "
                  "reading order, such as Hugging Face's bookcorpus)")
      ->capture_default_str();
  sub->add_option("--out", o.out_dir, "Output directory (shard-NNNNN.lbs)")->required();
  sub->add_option("--seq-len", io.max_seq_len, "Tokens per sequence")->capture_default_str();
  sub->add_option("--max-pred", io.max_pred, "Masked-LM slots per sequence")->capture_default_str();
  sub->add_option("--dupe-factor", io.dupe_factor, "Passes over each document")->capture_default_str();
  sub->add_option("--masked-lm-prob", io.masked_lm_prob, "Share of tokens masked")->capture_default_str();
  sub->add_option("--short-seq-prob", io.short_seq_prob, "Probability of a shorter target length")
      ->capture_default_str();
  sub->add_option("--seed", io.seed, "Seed of every random choice (unsigned 64-bit)")
      ->check(unsigned_seed_check())
      ->capture_default_str();
  sub->add_flag("--whole-word", io.whole_word, "Whole-word masking");
  sub->add_flag("--dynamic-masking", io.dynamic_masking, "Store unmasked; mask at load time per epoch");
  sub->add_option("--shard-size", o.shard_size, "Records per shard file")
      ->check(CLI::Range(int64_t(1), int64_t(1) << 40))
      ->capture_default_str();
  sub->add_option("--block-mb", args->block_mb, "Text per block (memory bound; random B comes from the same block)")
      ->capture_default_str();
  sub->add_option("--threads", o.threads, "Threads (0 = all, at most 1024); the output does not depend on it")
      ->capture_default_str();
  sub->add_option("--heldout-out", o.heldout_dir,
                  "Also write a held-out set here (for data.eval): whole documents, never in --out's instances")
      ->each([args](const std::string&) { args->heldout_out_given = true; });
  sub->add_option("--heldout-fraction", o.heldout_fraction,
                  "Share of documents held out, chosen by a hash of each document's tokens (with --heldout-out)")
      ->capture_default_str()
      ->each([args](const std::string&) { args->heldout_fraction_given = true; });
  sub->add_flag("--dedup", o.dedup,
                "Drop each document whose tokens repeat an earlier document's exactly (up to whitespace)");
  sub->add_option("--near-dedup", o.near_dedup,
                  "Also drop each document nearly the same as an earlier kept one: J, the Jaccard similarity of "
                  "their 5-token shingles where about half are caught (MinHash LSH; 0.8 is usual)")
      ->each([args](const std::string& v) { args->near_dedup_given = v.empty() ? "(empty)" : v; });
  sub->add_flag("--cased", args->cased, "Keep case and accents (default: uncased, as bert-base-uncased)");
  // A callback, not a "!--flag" bound to `progress`: CLI11 shows the latter as "--no-progress{false}".
  sub->add_flag_callback("--no-progress", [args] { args->opts.progress = false; }, "No progress line on stderr");
  o.progress = true;
  sub->callback([args] {
    const Status s = run_prep_command(*args);
    if (!s.is_ok()) report(s);
    if (s.code() == StatusCode::kInterrupted) set_exit_code(128 + stop_signal());  // as the shell would
  });
}

}  // namespace lansbert::cli
