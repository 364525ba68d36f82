// The synthetic micro-batch `lansbert bench` times: B sequences of `tokens` tokens each in rows
// of S positions, padded after their tokens, optionally packed into shared rows as
// `data.packing` packs a training micro-batch (data/packing.h), so the bench can time what
// padding and packing cost on any device with data it controls.
#pragma once

#include <cstdint>

#include "lansbert/core/status.h"
#include "lansbert/model/batch.h"

namespace lansbert::cli {

// The bench's sizes, one constraint at a time so that the message names the option out of its
// range: 3 <= S <= max_positions, batch >= 0 (0: probe), steps >= 1, 3 <= tokens <= S, P < S.
Status check_bench_shape(int S, int max_positions, int batch, int steps, int tokens, int P);

// Each sequence: [CLS], random ids of the vocabulary's ordinary range, segment B from the
// middle of its tokens, min(P, tokens - 2) masked slots used, spread over its tokens after
// [CLS] (the rest unused, as a short sequence's are in BERT's data), NSP labels alternating.
// REQUIRES: 3 <= tokens <= S (cmd_bench.cc checks --tokens-per-sequence before the backend opens).
Status bench_batch(int B, int S, int tokens, int P, int vocab, uint64_t seed, bool pack, Batch* out);

}  // namespace lansbert::cli
