// `lansbert show`: pretraining sequences as text, read from shards (ours or NVIDIA's HDF5) as
// training reads them, so a user can see what prep made of a corpus before paying for a run:
// both segments in words, whether B is the next sentence or a random one, each masked slot
// with what the model sees and what it must predict; or (--stats) the set's averages: fill,
// next-sentence balance, masked slots, [UNK] share.
#include <fmt/format.h>

#include <algorithm>
#include <cstdio>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "commands.h"
#include "lansbert/data/dataset.h"
#include "lansbert/data/vocab.h"

namespace lansbert::cli {

namespace {

struct ShowArgs {
  std::vector<std::string> data;
  std::string vocab;
  int64_t index = 0;
  int64_t count = 3;
  bool stats = false;
  bool json = false;
};

// A sequence as read: its tokens up to the padding, where B starts, and its masked slots.
struct Sequence {
  std::vector<int32_t> ids;  // [CLS] A [SEP] B [SEP], as the model sees them
  std::vector<int32_t> row;  // the whole row, padding included (a slot may point there)
  int b_start = 0;           // first position of segment B (after the first [SEP])
  bool random_next = false;
  struct Slot {
    int position;
    int32_t original;
  };
  std::vector<Slot> masked;
};

Sequence sequence_of(const Batch& b) {
  Sequence s;
  s.row.assign(b.input_ids.begin(), b.input_ids.begin() + b.seq_len);
  for (int p = 0; p < b.seq_len && b.input_mask[p]; ++p) {
    s.ids.push_back(b.input_ids[p]);
    if (s.b_start == 0 && b.segment_ids[p] == 1) s.b_start = p;
  }
  if (s.b_start == 0) s.b_start = static_cast<int>(s.ids.size());
  s.random_next = b.nsp_labels[0] == 1;
  for (int k = 0; k < b.max_pred; ++k) {
    if (b.masked_ids[k] != Batch::kIgnore) s.masked.push_back({b.masked_positions[k], b.masked_ids[k]});
  }
  return s;
}

// Word pieces back to words: "##" pieces join the piece before them.
std::string words(const Vocab& vocab, const std::vector<int32_t>& ids, int from, int to) {
  std::string out;
  for (int p = from; p < to; ++p) {
    const std::string& t = vocab.token(ids[p]);
    if (t.starts_with("##") && !out.empty()) {
      out += t.substr(2);
    } else {
      if (!out.empty()) out += ' ';
      out += t;
    }
  }
  return out;
}

// What the model sees at a masked slot against its target: BERT replaces 80% by [MASK], 10%
// by a random token and keeps 10%. A slot past the sequence's last token (which readers accept
// from HDF5 files: only position < seq_len is checked) points at padding.
const char* kind_of(const Vocab& vocab, const Sequence& s, const Sequence::Slot& m) {
  if (m.position >= static_cast<int>(s.ids.size())) return "padding";
  const int32_t shown = s.ids[m.position];
  if (shown == vocab.mask_id()) return "mask";
  return shown == m.original ? "kept" : "random";
}

// JSON of text that may not be UTF-8 (a path): invalid bytes as U+FFFD rather than an exception.
std::string dump(const nlohmann::json& j) { return j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace); }

void print_text(const Vocab& vocab, const ShardSet& set, int64_t index, const Sequence& s, int seq_len) {
  const int n = static_cast<int>(s.ids.size());
  // [CLS] A [SEP] | B [SEP]: the segments without their markers.
  std::printf("sequence %lld of %lld (%s)\n", static_cast<long long>(index), static_cast<long long>(set.count()),
              set.where(index).c_str());
  std::printf("  A: %s\n", words(vocab, s.ids, 1, std::max(1, s.b_start - 1)).c_str());
  std::printf("  B: %s\n", words(vocab, s.ids, s.b_start, std::max(s.b_start, n - 1)).c_str());
  std::printf("  next sentence: %s | %d of %d positions | %zu masked%s\n",
              s.random_next ? "random (NSP label 1)" : "the actual next (NSP label 0)", n, seq_len, s.masked.size(),
              set.dynamic_masking() ? " (dynamic masking: masked when loaded, shown unmasked)" : "");
  if (s.masked.empty()) return;
  std::string line = "  masked:";
  for (const auto& m : s.masked) {
    line += fmt::format(" {} {} <- {}", m.position, vocab.token(s.row[m.position]), vocab.token(m.original));
    const std::string_view kind = kind_of(vocab, s, m);
    if (kind == "padding") line += " (in the padding: no token there)";
    if (kind == "kept" || kind == "random") line += fmt::format(" ({})", kind);
    line += ',';
  }
  line.pop_back();
  std::printf("%s\n", line.c_str());
}

void print_json(const Vocab& vocab, const ShardSet& set, int64_t index, const Sequence& s) {
  nlohmann::json j;
  j["index"] = index;
  j["where"] = set.where(index);
  std::vector<std::string> tokens;
  for (const int32_t id : s.ids) tokens.push_back(vocab.token(id));
  j["tokens"] = tokens;
  j["b_start"] = s.b_start;
  j["random_next"] = s.random_next;
  nlohmann::json masked = nlohmann::json::array();
  for (const auto& m : s.masked) {
    masked.push_back({{"position", m.position},
                      {"input", vocab.token(s.row[m.position])},
                      {"original", vocab.token(m.original)},
                      {"kind", kind_of(vocab, s, m)}});
  }
  j["masked"] = masked;
  std::printf("%s\n", dump(j).c_str());
}

// Averages over sequences [index, index + count).
struct Totals {
  int64_t sequences = 0, tokens = 0, random_next = 0, masked = 0, mask = 0, kept = 0, padding = 0, unk = 0;
};

void print_stats(const ShowArgs& a, const ShardSet& set, const Totals& t, bool json) {
  const double n = double(t.sequences), tokens = double(t.tokens), masked = std::max(1.0, double(t.masked));
  const double fill = tokens / (n * set.seq_len());
  if (json) {
    nlohmann::json j = {{"sequences", t.sequences},
                        {"first", a.index},
                        {"of", set.count()},
                        {"shards", set.num_shards()},
                        {"seq_len", set.seq_len()},
                        {"max_pred", set.max_pred()},
                        {"tokens_per_sequence", tokens / n},
                        {"fill", fill},
                        {"random_next", double(t.random_next) / n},
                        {"masked_per_sequence", double(t.masked) / n},
                        {"masked_share", double(t.masked) / tokens},
                        {"mask_share", double(t.mask) / masked},
                        {"kept_share", double(t.kept) / masked},
                        {"masked_in_padding", t.padding},
                        {"unk_share", double(t.unk) / tokens},
                        {"dynamic_masking", set.dynamic_masking()}};
    std::printf("%s\n", dump(j).c_str());
    return;
  }
  std::printf("%lld sequences (from %lld of %lld, in %zu shard%s), seq_len %d, max_pred %d\n",
              static_cast<long long>(t.sequences), static_cast<long long>(a.index),
              static_cast<long long>(set.count()), set.num_shards(), set.num_shards() == 1 ? "" : "s", set.seq_len(),
              set.max_pred());
  std::printf("tokens: %.1f per sequence, %.1f%% of the positions (%.1f%% padding)\n", tokens / n, 100 * fill,
              100 * (1 - fill));
  std::printf("next sentence: %.1f%% random (BERT: 50%%)\n", 100.0 * double(t.random_next) / n);
  if (set.dynamic_masking()) {
    std::printf("masked: none stored (dynamic masking: masked when loaded)\n");
  } else {
    std::printf("masked: %.2f per sequence, %.1f%% of the tokens; %.1f%% [MASK], %.1f%% kept, %.1f%% random "
                "(BERT: 80/10/10)\n",
                double(t.masked) / n, 100.0 * double(t.masked) / tokens, 100.0 * double(t.mask) / masked,
                100.0 * double(t.kept) / masked, 100.0 * double(t.masked - t.mask - t.kept - t.padding) / masked);
    if (t.padding > 0) {
      std::printf("masked: %lld slot%s into the padding, at no token (the file's writer erred)\n",
                  static_cast<long long>(t.padding), t.padding == 1 ? " points" : "s point");
    }
  }
  std::printf("[UNK]: %.3f%% of the tokens\n", 100.0 * double(t.unk) / tokens);
}

Status run_show(const ShowArgs& a) {
  Vocab vocab;
  LB_RETURN_IF_ERROR(Vocab::load(a.vocab, &vocab));
  ShardSetOptions so;
  so.vocab_hash = vocab.hash();  // our shards must have been made with it (HDF5 records none)
  so.vocab_source = "--vocab " + a.vocab;
  so.token_limit = vocab.size();
  so.token_limit_source = "the vocabulary (--vocab " + a.vocab + ")";
  std::unique_ptr<ShardSet> set;
  LB_RETURN_IF_ERROR(ShardSet::open(a.data, so, &set));
  if (set->count() == 0) return Status::invalid_argument("show: the shards hold no sequences");
  if (a.index >= set->count()) {
    return Status::invalid_argument(fmt::format("show: --index {}: the shards hold {} sequences (0 to {})", a.index,
                                                set->count(), set->count() - 1));
  }
  // --stats reads everything from --index on unless --count was given.
  const int64_t end = a.count < 0 || a.count >= set->count() - a.index ? set->count() : a.index + a.count;
  Batch b;
  b.resize(1, set->seq_len(), set->max_pred());
  Totals t;
  for (int64_t i = a.index; i < end; ++i) {
    LB_RETURN_IF_ERROR(set->read(i, &b, 0));
    const Sequence s = sequence_of(b);
    if (!a.stats) {
      if (a.json) {
        print_json(vocab, *set, i, s);
      } else {
        if (i > a.index) std::printf("\n");
        print_text(vocab, *set, i, s, set->seq_len());
      }
      continue;
    }
    ++t.sequences;
    t.tokens += static_cast<int64_t>(s.ids.size());
    t.random_next += s.random_next;
    t.masked += static_cast<int64_t>(s.masked.size());
    // [UNK] in the text: the masked slots' targets put back first.
    std::vector<int32_t> text = s.ids;
    for (const auto& m : s.masked) {
      const std::string_view kind = kind_of(vocab, s, m);
      t.mask += kind == "mask";
      t.kept += kind == "kept";
      t.padding += kind == "padding";
      if (kind != "padding") text[m.position] = m.original;
    }
    for (const int32_t id : text) t.unk += id == vocab.unk_id();
  }
  if (a.stats) print_stats(a, *set, t, a.json);
  if (std::fflush(stdout) != 0) return Status::io_error("show: <stdout>: write failed");
  return Status::ok();
}

}  // namespace

void add_show_command(CLI::App& app) {
  auto args = std::make_shared<ShowArgs>();
  CLI::App* sub = app.add_subcommand(
      "show", "Print pretraining sequences of shards (lansbert's or NVIDIA's HDF5) as text: segments A and B, the "
              "next-sentence label, each masked slot and its target; or --stats, the set's averages");
  sub->add_option("--data", args->data, "Shard files, globs or directories, as data.train takes them")->required();
  sub->add_option("--vocab", args->vocab, "The vocab.txt the shards were made with")->required();
  sub->add_option("--index", args->index, "The first sequence (a global index over the sorted files)")
      ->check(CLI::Range(int64_t(0), INT64_MAX))
      ->capture_default_str();
  auto* count = sub->add_option("--count", args->count,
                                "How many sequences (default 3; with --stats every one from --index on)")
                    ->check(CLI::Range(int64_t(1), INT64_MAX));
  sub->add_flag("--stats", args->stats, "Averages instead of sequences: fill, next-sentence balance, masking, [UNK]");
  sub->add_flag("--json", args->json, "One JSON object per sequence (or one for --stats)");
  sub->callback([args, count] {
    if (args->stats && count->count() == 0) args->count = -1;
    report(run_show(*args));
  });
}

}  // namespace lansbert::cli
