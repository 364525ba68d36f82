// The synthetic micro-batch `lansbert bench` times: B sequences of `tokens` tokens each in rows
// of S positions, padded after their tokens, optionally packed into shared rows as
// `data.packing` packs a training micro-batch (data/packing.h), so the bench can time what
// padding and packing cost on any device with data it controls.
#pragma once

#include <cstdint>

#include "lansbert/core/status.h"
#include "lansbert/model/batch.h"

namespace lansbert::cli {

// Each sequence: [CLS], random ids of the vocabulary's ordinary range, segment B from the
// middle of its tokens, P masked slots spread over its tokens, NSP labels alternating.
// invalid_argument naming --tokens-per-sequence unless 2 <= tokens <= S and P < tokens.
Status bench_batch(int B, int S, int tokens, int P, int vocab, uint64_t seed, bool pack, Batch* out);

}  // namespace lansbert::cli
