// WordPieceTrainer: pair-merge training with incremental pair counts. Each distinct word is
// a sequence of symbol ids; pair counts are kept in a hash map, with the words containing
// each pair, and a max-heap of (count, pair) whose stale entries are refreshed when popped
// (counts of existing pairs only fall, except after a merge that re-creates an existing
// token, when fresh entries are pushed). A merge touches only the words holding its pair.
#include "lansbert/data/wordpiece_trainer.h"

#include <algorithm>
#include <map>
#include <queue>
#include <utility>

#include "word_scanner.h"

namespace lansbert {

namespace {

using Pair = uint64_t;
Pair make_pair_key(int32_t a, int32_t b) {
  return (static_cast<uint64_t>(static_cast<uint32_t>(a)) << 32) | static_cast<uint32_t>(b);
}
int32_t left_of(Pair p) {
  return static_cast<int32_t>(p >> 32);
}
int32_t right_of(Pair p) {
  return static_cast<int32_t>(p & 0xffffffffu);
}

struct HeapEntry {
  int64_t count;
  Pair pair;
  // Max-heap on count; on ties the smaller pair (left id, then right id) comes first.
  bool operator<(const HeapEntry& o) const {
    return count != o.count ? count < o.count : pair > o.pair;
  }
};

size_t utf8_len(unsigned char b) {
  return b < 0x80 ? 1 : b < 0xE0 ? 2 : b < 0xF0 ? 3 : 4;
}

std::vector<std::string> special_layout(int unused) {
  std::vector<std::string> t{"[PAD]"};
  const int before = std::min(unused, 99);
  for (int i = 0; i < before; ++i) t.push_back("[unused" + std::to_string(i) + "]");
  for (const char* s : {"[UNK]", "[CLS]", "[SEP]", "[MASK]"}) t.emplace_back(s);
  for (int i = before; i < unused; ++i) t.push_back("[unused" + std::to_string(i) + "]");
  return t;
}

struct State {
  std::vector<std::string> tokens;
  std::unordered_map<std::string, int32_t> ids;
  std::vector<std::vector<int32_t>> words;
  std::vector<int64_t> freq;
  std::unordered_map<Pair, int64_t> pair_count;
  std::unordered_map<Pair, std::vector<uint32_t>> where;

  int32_t id_of(const std::string& t) {
    auto [it, inserted] = ids.emplace(t, static_cast<int32_t>(tokens.size()));
    if (inserted) tokens.push_back(t);
    return it->second;
  }
  // Adds `sign` * freq of every pair of word w to the counts; records w for new pairs.
  void count_pairs(uint32_t w, int sign, std::vector<Pair>* touched) {
    const auto& s = words[w];
    for (size_t k = 0; k + 1 < s.size(); ++k) {
      const Pair p = make_pair_key(s[k], s[k + 1]);
      pair_count[p] += sign * freq[w];
      if (sign > 0 && touched) touched->push_back(p);
    }
  }
};

}  // namespace

void WordPieceTrainer::add_word(std::string_view word, uint64_t count) {
  counts_[std::string(word)] += count;
}

Status WordPieceTrainer::add_text(std::string_view text) {
  WordScanner scanner(opts_.lower_case);
  return scanner.scan(text, [&](std::string_view word, int chars) {
    if (chars <= opts_.max_word_chars)
      add_word(word);
    else
      ++long_words_skipped_;
  });
}

namespace {

// Splits each word into characters ("##" on all but the first) after giving every
// character an id: initial characters first, then "##" ones, each in byte order.
void init_words(const std::vector<std::pair<std::string_view, uint64_t>>& sorted, State* st) {
  std::map<std::string, int> initial, inner;
  for (const auto& [w, c] : sorted) {
    for (size_t i = 0; i < w.size();) {
      const size_t len = std::min(utf8_len(static_cast<unsigned char>(w[i])), w.size() - i);
      (i == 0 ? initial : inner)[std::string(w.substr(i, len))] = 0;
      i += len;
    }
  }
  for (const auto& kv : initial) st->id_of(kv.first);
  for (const auto& kv : inner) st->id_of("##" + kv.first);
  st->words.reserve(sorted.size());
  for (const auto& [w, c] : sorted) {
    std::vector<int32_t> syms;
    for (size_t i = 0; i < w.size();) {
      const size_t len = std::min(utf8_len(static_cast<unsigned char>(w[i])), w.size() - i);
      const std::string ch(w.substr(i, len));
      syms.push_back(st->ids.at(i == 0 ? ch : "##" + ch));
      i += len;
    }
    st->words.push_back(std::move(syms));
    st->freq.push_back(static_cast<int64_t>(c));
  }
  for (uint32_t w = 0; w < st->words.size(); ++w) {
    std::vector<Pair> touched;
    st->count_pairs(w, +1, &touched);
    std::sort(touched.begin(), touched.end());
    touched.erase(std::unique(touched.begin(), touched.end()), touched.end());
    for (Pair p : touched) st->where[p].push_back(w);
  }
}

// Replaces every (a, b) in the words holding it by the token a+b, updates the pair counts,
// and returns the pairs that involve the new token (to be pushed on the heap).
std::vector<Pair> merge(Pair pair, State* st) {
  const int32_t a = left_of(pair), b = right_of(pair);
  const std::string& rb = st->tokens[b];
  const int32_t m = st->id_of(st->tokens[a] + (rb.rfind("##", 0) == 0 ? rb.substr(2) : rb));
  std::vector<Pair> fresh;
  const std::vector<uint32_t> holders = st->where[pair];
  for (uint32_t w : holders) {
    auto& s = st->words[w];
    bool has = false;
    for (size_t k = 0; k + 1 < s.size() && !has; ++k) has = s[k] == a && s[k + 1] == b;
    if (!has) continue;
    st->count_pairs(w, -1, nullptr);
    size_t r = 0;
    for (size_t k = 0; k < s.size(); ++k) {
      const bool hit = k + 1 < s.size() && s[k] == a && s[k + 1] == b;
      s[r++] = hit ? m : s[k];
      if (hit) ++k;
    }
    s.resize(r);
    std::vector<Pair> touched;
    st->count_pairs(w, +1, &touched);
    std::sort(touched.begin(), touched.end());
    touched.erase(std::unique(touched.begin(), touched.end()), touched.end());
    for (Pair p : touched) {
      if (left_of(p) == m || right_of(p) == m) {
        st->where[p].push_back(w);
        fresh.push_back(p);
      }
    }
  }
  st->pair_count.erase(pair);
  st->where.erase(pair);
  std::sort(fresh.begin(), fresh.end());
  fresh.erase(std::unique(fresh.begin(), fresh.end()), fresh.end());
  return fresh;
}

}  // namespace

Status WordPieceTrainer::train(std::vector<std::string>* out) const {
  if (opts_.vocab_size < 5) return Status::invalid_argument("vocab size must be at least 5");
  State st;
  for (const std::string& s : special_layout(opts_.unused_tokens)) st.id_of(s);
  // Words in byte order, so ids and tie-breaks do not depend on hash-map iteration order.
  std::vector<std::pair<std::string_view, uint64_t>> sorted(counts_.begin(), counts_.end());
  std::sort(sorted.begin(), sorted.end());
  init_words(sorted, &st);

  std::priority_queue<HeapEntry> heap;
  for (const auto& [p, c] : st.pair_count) heap.push({c, p});
  const size_t target = static_cast<size_t>(opts_.vocab_size);
  while (st.tokens.size() < target && !heap.empty()) {
    const HeapEntry top = heap.top();
    heap.pop();
    auto pc = st.pair_count.find(top.pair);
    const int64_t now = pc == st.pair_count.end() ? 0 : pc->second;
    if (now <= 0) continue;
    if (now != top.count) {  // stale: requeue with the current count
      heap.push({now, top.pair});
      continue;
    }
    if (now < opts_.min_frequency) break;
    for (Pair p : merge(top.pair, &st)) heap.push({st.pair_count[p], p});
  }
  *out = std::move(st.tokens);
  return Status::ok();
}

}  // namespace lansbert
