// WordPieceTrainer: learns a WordPiece vocabulary from text, so a user without BERT's
// vocab.txt (or with text in another domain or language) can make one. The method is
// Hugging Face tokenizers' WordPieceTrainer: words come from BERT's basic tokenizer
// (split_words), start as characters (non-initial ones with the "##" prefix), and the most
// frequent adjacent pair is merged until the vocabulary reaches its size.
//
// Determinism: words are processed in byte order; among pairs of equal count the one whose
// (left id, right id) is smallest wins, ids being assigned in creation order (specials,
// characters in code point order, "##" characters in code point order, then merges).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "lansbert/core/status.h"

namespace lansbert {

struct WordPieceTrainerOptions {
  int vocab_size = 30522;     // total, specials included
  int64_t min_frequency = 2;  // a pair seen fewer times is never merged
  // [unused0..] tokens. With 99 or more, [PAD] [UNK] [CLS] [SEP] [MASK] get BERT's ids
  // 0 100 101 102 103, and unused tokens past the 99th follow [MASK]; with fewer, the
  // specials follow them directly.
  int unused_tokens = 99;
  bool lower_case = true;
  int max_word_chars = 100;  // longer words are skipped (the tokenizer makes them [UNK])
};

class WordPieceTrainer {
 public:
  explicit WordPieceTrainer(WordPieceTrainerOptions opts = {}) : opts_(opts) {}

  // Counts the words of `text` (a line or a document). Invalid UTF-8 is an error naming
  // the byte offset.
  Status add_text(std::string_view text);
  // Counts one already-normalised word `count` times.
  void add_word(std::string_view word, uint64_t count = 1);
  size_t distinct_words() const { return counts_.size(); }
  // Words add_text skipped for exceeding max_word_chars (each occurrence).
  uint64_t long_words_skipped() const { return long_words_skipped_; }

  // The vocabulary in id order. It is larger than vocab_size only when the specials and the
  // characters alone exceed it, and smaller when no pair reaches min_frequency.
  Status train(std::vector<std::string>* tokens) const;

 private:
  WordPieceTrainerOptions opts_;
  std::unordered_map<std::string, uint64_t> counts_;
  uint64_t long_words_skipped_ = 0;
};

}  // namespace lansbert
