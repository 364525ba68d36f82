// Paths of the committed test data, shared by the data-layer tests.
#pragma once

#include <string>

namespace lansbert::testing {

inline std::string data_path(const std::string& name) {
  return std::string(LANSBERT_SOURCE_DIR) + "/tests/data/" + name;
}
inline std::string vocab_path() {
  return data_path("bert-base-uncased-vocab.txt");
}

}  // namespace lansbert::testing
