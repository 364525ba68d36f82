// The synthetic micro-batch of `lansbert bench` (bench_batch.h).
#include "bench_batch.h"

#include <algorithm>
#include <random>

#include "lansbert/data/packing.h"

namespace lansbert::cli {

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
