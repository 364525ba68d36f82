// Helpers shared by the data tests: synthetic tokenized documents and a scratch directory.
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>
#include <string_view>
#include <vector>

#include "lansbert/core/philox.h"
#include "lansbert/core/status.h"
#include "lansbert/data/instances.h"

namespace lansbert::testing {

// `n` documents of 3..`max_sentences` sentences of 1..`max_len` ids in [1000, vocab).
inline std::vector<Document> synthetic_documents(int n, int max_sentences, int max_len,
                                                 uint64_t seed = 7, int vocab = 30522) {
  std::vector<Document> docs(n);
  uint64_t e = 0;
  auto draw = [&](uint32_t m) { return philox_bits(RngKey{seed, 0, 0}, e++) % m; };
  for (auto& d : docs) {
    d.resize(3 + draw(max_sentences - 2));
    for (auto& s : d) {
      s.resize(1 + draw(max_len));
      for (auto& t : s) t = 1000 + static_cast<int32_t>(draw(vocab - 1000));
    }
  }
  return docs;
}

// Calls f(word) for each space-separated word of `text`.
template <typename F>
void for_each_word(std::string_view text, F f) {
  size_t i = 0;
  while (i < text.size()) {
    while (i < text.size() && text[i] == ' ') ++i;
    size_t j = i;
    while (j < text.size() && text[j] != ' ') ++j;
    if (j > i) f(text.substr(i, j - i));
    i = j;
  }
}

// A stand-in tokenizer for prep: each word becomes 1000 + its FNV-1a hash mod 29000.
inline Status hash_tokenize(std::string_view text, std::vector<int32_t>* ids) {
  for_each_word(text, [ids](std::string_view w) {
    uint32_t h = 2166136261u;
    for (const char c : w) h = (h ^ uint8_t(c)) * 16777619u;
    ids->push_back(1000 + int32_t(h % 29000));
  });
  return Status::ok();
}

inline MaskingVocab test_vocab() {
  MaskingVocab v;
  v.is_continuation.assign(30522, false);
  for (int i = 1000; i < 30522; i += 3) v.is_continuation[i] = true;  // every third id is "##x"
  return v;
}

inline std::string scratch_dir(const std::string& name) {
  const std::filesystem::path p = std::filesystem::path(LANSBERT_BINARY_DIR) / "test-scratch" / name;
  std::filesystem::remove_all(p);
  std::filesystem::create_directories(p);
  return p.string();
}

}  // namespace lansbert::testing
