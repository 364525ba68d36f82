// BertTokenizer: WordScanner's words through WordPiece. The greedy search hashes every
// prefix of the remaining word in one pass, then probes the piece table from the longest
// prefix down, trying only prefixes that end on a character boundary. Ids go straight into
// the caller's vector: no per-word or per-piece allocation.
#include "lansbert/data/tokenizer.h"

#include <algorithm>

#include "word_scanner.h"

namespace lansbert {

BertTokenizer::BertTokenizer(const Vocab& vocab, TokenizerOptions opts)
    : vocab_(vocab), opts_(opts) {
  pieces_.build(vocab_);
}

template <class OnPiece>
void BertTokenizer::wordpiece(std::string_view word, int chars, OnPiece&& on_piece) const {
  if (chars > opts_.max_word_chars) {
    on_piece(vocab_.unk_id());
    return;
  }
  // Pieces are collected first because a missing piece anywhere turns the whole word into
  // one [UNK]. Words of up to 64 pieces use the stack.
  constexpr size_t kMaxStackPieces = 64;
  int32_t stack_ids[kMaxStackPieces];
  std::vector<int32_t> heap_ids;
  size_t count = 0;
  constexpr size_t kMaxPrefix = 128;
  uint64_t h[kMaxPrefix + 1];
  const char* w = word.data();
  const size_t n = word.size();
  size_t start = 0;
  while (start < n) {
    const bool cont = start > 0;
    const size_t maxl = std::min(n - start, pieces_.max_len(cont));
    const size_t hashed = std::min(maxl, kMaxPrefix);
    h[0] = PieceTable::seed(cont);
    for (size_t l = 1; l <= hashed; ++l) {
      h[l] = PieceTable::extend(h[l - 1], static_cast<unsigned char>(w[start + l - 1]));
    }
    int32_t id = -1;
    size_t l = maxl;
    for (; l > 0; --l) {
      const size_t end = start + l;
      if (end < n && (static_cast<unsigned char>(w[end]) & 0xC0) == 0x80) continue;
      uint64_t hl;
      if (l <= hashed) {
        hl = h[l];
      } else {  // pieces longer than kMaxPrefix bytes: rare, hash directly
        hl = h[hashed];
        for (size_t k = hashed; k < l; ++k)
          hl = PieceTable::extend(hl, static_cast<unsigned char>(w[start + k]));
      }
      id = pieces_.find(w + start, l, cont, hl);
      if (id >= 0) break;
    }
    if (id < 0) {
      on_piece(vocab_.unk_id());
      return;
    }
    if (count < kMaxStackPieces) {
      stack_ids[count] = id;
    } else {
      if (heap_ids.empty()) heap_ids.assign(stack_ids, stack_ids + kMaxStackPieces);
      heap_ids.push_back(id);
    }
    ++count;
    start += l;
  }
  const int32_t* ids = count <= kMaxStackPieces ? stack_ids : heap_ids.data();
  for (size_t k = 0; k < count; ++k) on_piece(ids[k]);
}

Status BertTokenizer::encode(std::string_view text, std::vector<int32_t>* ids) const {
  WordScanner scanner(opts_.lower_case);
  return scanner.scan(text, [&](std::string_view word, int chars) {
    wordpiece(word, chars, [&](int32_t id) { ids->push_back(id); });
  });
}

Status BertTokenizer::encode_tokens(std::string_view text, std::vector<std::string>* pieces) const {
  WordScanner scanner(opts_.lower_case);
  return scanner.scan(text, [&](std::string_view word, int chars) {
    wordpiece(word, chars, [&](int32_t id) { pieces->push_back(vocab_.token(id)); });
  });
}

Status BertTokenizer::split_words(std::string_view text, std::vector<std::string>* words) const {
  WordScanner scanner(opts_.lower_case);
  return scanner.scan(text, [&](std::string_view word, int) { words->emplace_back(word); });
}

}  // namespace lansbert
