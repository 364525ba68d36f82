// Helpers shared by the data tests: synthetic tokenized documents and a scratch directory.
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include "lansbert/core/philox.h"
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
