// BertTokenizer: BERT's basic tokenizer (clean, CJK spacing, NFD + accent stripping and
// lower-casing when uncased, whitespace and punctuation splitting) followed by WordPiece,
// byte for byte as Hugging Face's BertTokenizer / tokenizers BertNormalizer does it.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "lansbert/core/status.h"
#include "lansbert/data/piece_table.h"
#include "lansbert/data/vocab.h"

namespace lansbert {

struct TokenizerOptions {
  bool lower_case = true;          // uncased: lowercase and strip accents
  int max_word_chars = 100;        // a longer word becomes one [UNK]
};

class BertTokenizer {
 public:
  BertTokenizer(const Vocab& vocab, TokenizerOptions opts = {});

  // Appends the WordPiece ids of `text` (no [CLS]/[SEP]) to `ids`. Invalid UTF-8 is an
  // error naming the byte offset within `text`.
  Status encode(std::string_view text, std::vector<int32_t>* ids) const;
  // The same, as word pieces (tests compare them with Hugging Face's).
  Status encode_tokens(std::string_view text, std::vector<std::string>* pieces) const;
  // Basic tokenization only (normalised words before WordPiece): `lansbert tokenize --words`.
  Status split_words(std::string_view text, std::vector<std::string>* words) const;

  const Vocab& vocab() const { return vocab_; }
  const TokenizerOptions& options() const { return opts_; }

 private:
  // Greedy longest-match-first WordPiece of one normalised word; calls on_piece(id) per
  // piece, or once with [UNK] when the word is too long or a piece is missing.
  template <class OnPiece>
  void wordpiece(std::string_view word, int chars, OnPiece&& on_piece) const;

  const Vocab& vocab_;  // REQUIRES: outlives the tokenizer
  TokenizerOptions opts_;
  PieceTable pieces_;
};

}  // namespace lansbert
