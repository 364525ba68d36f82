// Vocab: a WordPiece vocabulary file (one token per line, line number = id), as BERT's
// vocab.txt. Lookups by token and by id; the special tokens' ids.
#pragma once

#include <cstdint>
#include <cstdio>
#include <functional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "lansbert/core/status.h"

namespace lansbert {

class Vocab {
 public:
  // Reads `path`; a missing file, an empty file, a duplicate token (names its line) or a
  // missing special token ([PAD] [UNK] [CLS] [SEP] [MASK]) is an error.
  static Status load(const std::string& path, Vocab* out);
  static Status from_tokens(std::vector<std::string> tokens, Vocab* out);

  int size() const { return static_cast<int>(tokens_.size()); }
  // Returns the id of `token`, or -1.
  int32_t find(std::string_view token) const;
  const std::string& token(int32_t id) const { return tokens_[id]; }
  const std::vector<std::string>& tokens() const { return tokens_; }
  // By id: true for a token that continues a word ("##..."), what whole-word masking groups
  // (MaskingVocab::is_continuation: prep, and the loader's dynamic masking).
  std::vector<bool> continuation_flags() const;
  // 64-bit FNV-1a over the file's tokens and newlines: shards record it to detect mismatch.
  uint64_t hash() const { return hash_; }

  int32_t pad_id() const { return pad_; }
  int32_t unk_id() const { return unk_; }
  int32_t cls_id() const { return cls_; }
  int32_t sep_id() const { return sep_; }
  int32_t mask_id() const { return mask_; }

 private:
  std::vector<std::string> tokens_;
  // Transparent hash so find(string_view) needs no temporary std::string.
  struct Hash {
    using is_transparent = void;
    size_t operator()(std::string_view s) const { return std::hash<std::string_view>{}(s); }
  };
  Status init(std::vector<std::string> tokens, const std::string& where);

  std::unordered_map<std::string, int32_t, Hash, std::equal_to<>> index_;
  uint64_t hash_ = 0;
  int32_t pad_ = -1, unk_ = -1, cls_ = -1, sep_ = -1, mask_ = -1;
};

// A vocabulary hash as the messages and trainer.json write it: "0x" and 16 hex digits.
inline std::string vocab_hash_text(uint64_t hash) {
  char text[19];
  std::snprintf(text, sizeof text, "0x%016llx", static_cast<unsigned long long>(hash));
  return text;
}

}  // namespace lansbert
