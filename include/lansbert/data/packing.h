// Sequence packing (`data.packing: true`): the sequences of a micro-batch share rows of S token
// positions, one after another, so the model computes on fewer rows and less padding. BERT's
// data leaves much of each row empty (prep prints the share: 42% padding on the sample corpus at
// 128, 81% at 512), and every layer computes on it.
//
// Each micro-batch keeps the sequences the loader read for it, so the data order, the masked
// slots, the losses (means over the same masked tokens and sequences) and the checkpointed data
// position do not change; only the rows they sit in do. The model keeps the packed sequences
// apart: a token attends only to the tokens of its own sequence (input_mask numbers them, see
// kernels/softmax.h attention_visible), its positions count from its own [CLS], and the NSP
// head reads each sequence's [CLS]. Without dropout a packed micro-batch gives the loss and
// gradients of the unpacked one to rounding (tests/data/packing_test.cc); with dropout
// the masks are drawn over other positions, so the two differ as two seeds do.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "lansbert/core/status.h"
#include "lansbert/data/dataset.h"
#include "lansbert/model/batch.h"

namespace lansbert {

// Whether sequence `row` of b (not packed) can be packed: its mask is ones then zeros with at
// least one one, and its used masked slots are at its tokens. Sets *length to its tokens. The
// loader asks it as it reads each sample, so that an error can name the sample.
Status packable_sequence(const Batch& b, int row, int* length);
// packable_sequence for the readers of samples (the loader, the held-out evaluation): an error
// names global sample `sample` of `set` by its file and index there (ShardSet::where, built
// only then), "data.packing: <file>: sample N: ...".
Status packable_sample(const Batch& b, int row, const ShardSet& set, int64_t sample, int* length);

// Packs b (not packed) in place: first-fit decreasing, the sequences taken longest first (ties
// in batch order), each put in the first row with room. An error names the first sequence that
// packable_sequence refuses; b is then unchanged.
Status pack_batch(Batch* b);

// pack_batch of sequences packable_sequence has accepted already (the loader, which checks each
// sample as it reads it): `lengths` are the lengths it set, one per sequence.
void pack_checked_batch(Batch* b, const std::vector<int>& lengths);

}  // namespace lansbert
