// Shared by the model tests: a seeded random micro-batch with padding, masked slots
// (one unused) and both NSP labels.
#pragma once

#include <random>
#include <vector>

#include "lansbert/model/batch.h"

namespace lansbert::testing {

inline Batch random_batch(int B, int S, int P, int vocab, uint32_t seed) {
  std::mt19937 g(seed);
  Batch b;
  b.resize(B, S, P);
  for (int i = 0; i < B; ++i) {
    const int len = S - (i % 2) * (S / 3);  // every other sequence padded by a third
    for (int s = 0; s < S; ++s) {
      const size_t k = size_t(i) * S + s;
      if (s < len) {
        b.input_ids[k] = s == 0 ? 101 % vocab : int(g() % vocab);
        b.segment_ids[k] = s >= len / 2;
        b.input_mask[k] = 1;
      }
    }
    for (int p = 0; p < P; ++p) {
      const size_t k = size_t(i) * P + p;
      if (p == P - 1 && i == 0) continue;  // one unused slot: position 0, label ignored
      b.masked_positions[k] = 1 + (p * 3 + i) % (len - 1);
      b.masked_ids[k] = int(g() % vocab);
    }
    b.nsp_labels[i] = i % 2;
  }
  return b;
}

// Sequences of the given lengths, each in its own row of S positions (then padding), with P
// masked slots at their tokens (sequence 0's last slot unused) and both NSP labels: batches
// that data/packing.h can pack.
inline Batch batch_of_lengths(const std::vector<int>& lengths, int S, int P, int vocab, uint32_t seed) {
  std::mt19937 g(seed);
  Batch b;
  const int B = int(lengths.size());
  b.resize(B, S, P);
  for (int i = 0; i < B; ++i) {
    const int len = lengths[i];
    for (int s = 0; s < len; ++s) {
      const size_t k = size_t(i) * S + s;
      b.input_ids[k] = s == 0 ? 101 % vocab : int(g() % vocab);
      b.segment_ids[k] = s >= len / 2;
      b.input_mask[k] = 1;
    }
    for (int p = 0; p < P; ++p) {
      if (p == P - 1 && i == 0) continue;
      b.masked_positions[size_t(i) * P + p] = 1 + int(g() % (len - 1));
      b.masked_ids[size_t(i) * P + p] = int(g() % vocab);
    }
    b.nsp_labels[i] = int(g() % 2);
  }
  return b;
}

}  // namespace lansbert::testing
