// `lansbert vocab`: trains a WordPiece vocabulary from the corpus files prep reads (text, one
// line a unit of text, or JSON Lines, one record's document a unit; plain or compressed:
// CorpusFile) and writes vocab.txt. The file is written to a temporary name, flushed and
// renamed, so an interrupted run never leaves a truncated vocabulary; an existing file is
// kept unless --force.
#include <cstdio>
#include <filesystem>
#include <string>
#include <vector>

#include "commands.h"
#include "lansbert/core/file_io.h"
#include "lansbert/data/corpus_file.h"
#include "lansbert/data/wordpiece_trainer.h"

namespace lansbert::cli {

namespace {

struct VocabArgs {
  std::vector<std::string> inputs;
  CorpusOptions corpus;
  std::string out;
  int size = 30522;
  int64_t min_frequency = 2;
  int unused = 99;
  bool cased = false;
  bool force = false;
};

Status run_vocab(const VocabArgs& a) {
  LB_RETURN_IF_ERROR(check_corpus_options(a.corpus));
  // Before the corpus is read, which may take hours: an --out that cannot be written fails now
  // (first, so that a directory is not offered --force, which cannot help).
  LB_RETURN_IF_ERROR(check_can_create(a.out, PathKind::kFile, "--out"));
  if (!a.force && std::filesystem::exists(a.out)) {
    return Status::invalid_argument(a.out + ": exists (use --force to overwrite)");
  }
  WordPieceTrainerOptions opts;
  opts.vocab_size = a.size;
  opts.min_frequency = a.min_frequency;
  opts.unused_tokens = a.unused;
  opts.lower_case = !a.cased;
  WordPieceTrainer trainer(opts);
  std::string text;
  for (const std::string& in : a.inputs) {
    CorpusFile reader;
    LB_RETURN_IF_ERROR(reader.open(in, a.corpus));
    for (bool got = true;;) {
      LB_RETURN_IF_ERROR(reader.next(&text, &got));
      if (!got) break;
      Status s = trainer.add_text(text);
      if (!s.is_ok()) {
        return Status::corrupt(reader.name() + ":" + std::to_string(reader.line_no()) + ": " +
                               s.message());
      }
    }
  }
  // A vocabulary of the special tokens alone would tokenize everything as [UNK]; prep refuses
  // such input too.
  if (trainer.distinct_words() == 0 && trainer.long_words_skipped() > 0)
    return Status::invalid_argument(
        "vocab: the input's only words are longer than " + std::to_string(opts.max_word_chars) + " characters (" +
        std::to_string(trainer.long_words_skipped()) +
        " occurrences), which are skipped (the tokenizer makes such words [UNK]); nothing written to " + a.out);
  if (trainer.distinct_words() == 0)
    return Status::invalid_argument("vocab: the input holds no words (empty input?); nothing written to " + a.out);
  std::vector<std::string> tokens;
  LB_RETURN_IF_ERROR(trainer.train(&tokens));
  std::vector<std::string_view> lines;  // token, newline, token, ...
  lines.reserve(2 * tokens.size());
  for (const std::string& t : tokens) lines.insert(lines.end(), {t, "\n"});
  LB_RETURN_IF_ERROR(create_parent_directories(a.out, "--out"));
  LB_RETURN_IF_ERROR(write_file_atomic(a.out, lines));
  std::fprintf(stderr, "lansbert vocab: %zu distinct words, wrote %zu tokens to %s\n",
               trainer.distinct_words(), tokens.size(), a.out.c_str());
  if (tokens.size() != static_cast<size_t>(a.size)) {
    std::fprintf(stderr, "lansbert vocab: note: asked for %d tokens (%s)\n", a.size,
                 tokens.size() > static_cast<size_t>(a.size)
                     ? "the specials and characters alone exceed it"
                     : "no more pairs reach --min-frequency");
  }
  return Status::ok();
}

}  // namespace

void add_vocab_command(CLI::App& app) {
  auto args = std::make_shared<VocabArgs>();
  CLI::App* sub = app.add_subcommand("vocab", "Train a WordPiece vocabulary from the corpus files prep reads");
  sub->add_option("--input", args->inputs,
                  "Text files (a line a unit of text), JSON Lines (a record's document a unit) or MediaWiki XML (an "
                  "article's prose a unit), plain, gzip, zstd or bzip2 ('-': stdin)")
      ->required();
  sub->add_option("--input-format", args->corpus.format,
                  "auto (jsonl for *.jsonl, *.ndjson and *.json, mediawiki for *.xml and Wikipedia's *.xml-pNpM, before "
                  "any .gz, .zst or .bz2; text otherwise), text, jsonl, mediawiki (Wikipedia's XML dumps) or book (each file one "
                  "document: a plain-text book, Project Gutenberg's licence and headings dropped)")
      ->capture_default_str();
  sub->add_option("--json-key", args->corpus.json_key, "The field of each JSON Lines record that holds its document")
      ->capture_default_str();
  sub->add_option("--out", args->out, "Output vocab.txt")->required();
  sub->add_option("--size", args->size, "Vocabulary size, specials included")
      ->check(CLI::Range(5, 1 << 24))
      ->capture_default_str();
  sub->add_option("--min-frequency", args->min_frequency, "Least count of a merged pair")
      ->check(CLI::Range(int64_t(0), int64_t(1000000000)))
      ->capture_default_str();
  sub->add_option("--unused", args->unused, "Number of [unusedN] tokens (99 gives BERT's ids)")
      ->check(CLI::Range(0, 1 << 20))
      ->capture_default_str();
  sub->add_flag("--cased", args->cased, "Keep case and accents");
  sub->add_flag("--force", args->force, "Overwrite --out if it exists");
  sub->callback([args] { report(run_vocab(*args)); });
}

}  // namespace lansbert::cli
