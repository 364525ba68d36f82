// The synthetic micro-batch of `lansbert bench` and the check of its sizes (bench_batch.h).
#include "bench_batch.h"

#include <algorithm>
#include <random>
#include <string>

#include "lansbert/data/packing.h"

namespace lansbert::cli {

Status check_bench_shape(int S, int max_positions, int batch, int steps, int tokens, int P) {
  // [CLS], a token and [SEP] make the shortest sequence.
  std::string bad;
  if (S < 3 || S > max_positions)
    bad = "--seq-len " + std::to_string(S) + ": need 3 <= it <= " + std::to_string(max_positions) +
          " (the model's max_positions)";
  else if (batch < 0)
    bad = "--batch " + std::to_string(batch) + ": need >= 1 (or 0: the largest that fits, cuda)";
  else if (steps < 1)
    bad = "--steps " + std::to_string(steps) + ": need >= 1";
  else if (tokens < 3 || tokens > S)
    bad = "--tokens-per-sequence " + std::to_string(tokens) + ": need 3 <= it <= --seq-len (" + std::to_string(S) + ")";
  else if (P >= S)
    bad = "--max-pred " + std::to_string(P) + ": need it below --seq-len (" + std::to_string(S) + ")";
  return bad.empty() ? Status::ok() : Status::invalid_argument("bench: " + bad);
}

Status bench_batch(int B, int S, int tokens, int P, int vocab, uint64_t seed, bool pack, Batch* out) {
  const int used = std::min(P, tokens - 2);  // distinct positions in [1, tokens - 2]
  std::mt19937_64 g(seed);
  Batch& b = *out;
  b = Batch();
  b.resize(B, S, P);
  for (int i = 0; i < B; ++i) {
    for (int s = 0; s < tokens; ++s) {
      const size_t at = size_t(i) * S + s;
      b.input_ids[at] = s == 0 ? 101 : int(1000 + g() % (vocab - 1000));
      b.segment_ids[at] = s >= tokens / 2;
      b.input_mask[at] = 1;
    }
    for (int p = 0; p < used; ++p) {
      b.masked_positions[size_t(i) * P + p] = 1 + int(p * (tokens - 2) / used);
      b.masked_ids[size_t(i) * P + p] = int(1000 + g() % (vocab - 1000));
    }
    b.nsp_labels[i] = i % 2;
  }
  return pack ? pack_batch(&b) : Status::ok();
}

}  // namespace lansbert::cli
