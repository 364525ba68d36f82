// `lansbert tokenize`: BERT-tokenizes text one line at a time (a file or stdin) and prints
// one line of ids ([CLS] ... [SEP]) or word pieces per input line, so users can inspect
// the tokenizer and scripts can compare it with Hugging Face's. The input is read as prep
// reads a text corpus (data/corpus_file.h: plain, gzip or Zstandard). Invalid UTF-8 stops the
// command with the file, line and byte offset, unless --skip-invalid asks to skip the line.
#include <charconv>
#include <cstdio>
#include <string>
#include <vector>

#include "commands.h"
#include "lansbert/data/corpus_file.h"
#include "lansbert/data/tokenizer.h"
#include "lansbert/data/vocab.h"

namespace lansbert::cli {

namespace {

struct TokenizeArgs {
  std::string vocab;
  std::string input;
  bool tokens = false;
  bool ids = false;
  bool cased = false;
  bool skip_invalid = false;
  bool no_special = false;
  bool words = false;
};

// The text byte is the file's for a plain file, the decompressed stream's for gzip or zstd.
Status line_error(const CorpusFile& r, const Status& s) {
  return Status::corrupt(r.name() + ":" + std::to_string(r.line_no()) + ": " + s.message() +
                         " in the line starting at text byte " + std::to_string(r.line_start()));
}

// --words: the normalised words before WordPiece, space-separated.
Status print_words(const BertTokenizer& tok, const CorpusFile& reader, std::string_view line,
                   bool skip_invalid, size_t* skipped, std::string* out) {
  std::vector<std::string> words;
  Status s = tok.split_words(line, &words);
  if (!s.is_ok()) {
    if (!skip_invalid) return line_error(reader, s);
    ++*skipped;
    return Status::ok();
  }
  for (size_t k = 0; k < words.size(); ++k) {
    if (k > 0) out->push_back(' ');
    out->append(words[k]);
  }
  out->push_back('\n');
  return Status::ok();
}

Status run_tokenize(const TokenizeArgs& a) {
  Vocab vocab;
  LB_RETURN_IF_ERROR(Vocab::load(a.vocab, &vocab));
  TokenizerOptions opts;
  opts.lower_case = !a.cased;
  const BertTokenizer tok(vocab, opts);
  CorpusFile reader;
  CorpusOptions text;
  text.format = "text";  // every line as it is: no JSON sniffing
  LB_RETURN_IF_ERROR(reader.open(a.input.empty() ? "-" : a.input, text));

  std::string out;
  out.reserve(1 << 20);
  std::vector<int32_t> ids;
  size_t skipped = 0;
  std::string line;
  for (;;) {
    bool got = false;
    LB_RETURN_IF_ERROR(reader.next(&line, &got));
    if (!got) break;
    if (out.size() >= (1 << 20)) {
      if (std::fwrite(out.data(), 1, out.size(), stdout) != out.size()) {
        return Status::io_error("<stdout>: write failed");
      }
      out.clear();
    }
    if (a.words) {
      LB_RETURN_IF_ERROR(print_words(tok, reader, line, a.skip_invalid, &skipped, &out));
      continue;
    }
    ids.clear();
    if (!a.no_special) ids.push_back(vocab.cls_id());
    Status s = tok.encode(line, &ids);
    if (!s.is_ok()) {
      if (a.skip_invalid) {
        ++skipped;
        continue;
      }
      return line_error(reader, s);
    }
    if (!a.no_special) ids.push_back(vocab.sep_id());
    for (size_t k = 0; k < ids.size(); ++k) {
      if (k > 0) out.push_back(' ');
      if (a.tokens) {
        out.append(vocab.token(ids[k]));
      } else {
        char num[16];
        auto r = std::to_chars(num, num + sizeof num, ids[k]);
        out.append(num, r.ptr);
      }
    }
    out.push_back('\n');
  }
  if (std::fwrite(out.data(), 1, out.size(), stdout) != out.size() || std::fflush(stdout) != 0) {
    return Status::io_error("<stdout>: write failed");
  }
  if (skipped > 0) {
    std::fprintf(stderr, "lansbert tokenize: skipped %zu line(s) of invalid UTF-8 in %s\n", skipped,
                 reader.name().c_str());
  }
  return Status::ok();
}

}  // namespace

void add_tokenize_command(CLI::App& app) {
  auto args = std::make_shared<TokenizeArgs>();
  CLI::App* sub =
      app.add_subcommand("tokenize", "BERT-tokenize text, one output line per input line");
  sub->add_option("--vocab", args->vocab, "WordPiece vocab.txt")->required();
  auto* ids = sub->add_flag("--ids", args->ids, "Print token ids (the default)");
  auto* tokens = sub->add_flag("--tokens", args->tokens, "Print word pieces instead of ids")->excludes(ids);
  sub->add_flag("--cased", args->cased, "Keep case and accents (for cased vocabularies)");
  sub->add_flag("--skip-invalid", args->skip_invalid,
                "Skip lines of invalid UTF-8 (their count goes to stderr) instead of failing");
  sub->add_flag("--words", args->words,
                "Print the normalised words before WordPiece (basic tokenization)")
      ->excludes(ids)
      ->excludes(tokens);
  sub->add_flag("--no-special", args->no_special, "Omit [CLS] and [SEP]");
  sub->add_option("file", args->input, "Input text, plain, gzip or Zstandard (default: stdin, or -)");
  sub->callback([args] { report(run_tokenize(*args)); });
}

}  // namespace lansbert::cli
