// Batch: one micro-batch of pretraining instances as the model consumes it, in host memory.
// The data layer fills it (from our shards or NVIDIA's HDF5 files); the model copies it to
// its device once per step.
//
// Each sequence (instance) has a row of S token positions of its own, unless the batch is
// packed (data/packing.h, `data.packing`): then several sequences share a row, one after
// another, and the model computes on `rows` rows instead of `batch`. The per-sequence fields
// (masked slots, NSP labels) are the same either way.
#pragma once

#include <cstdint>
#include <vector>

namespace lansbert {

struct Batch {
  int batch = 0;     // B sequences
  int seq_len = 0;   // S token positions per row
  int max_pred = 0;  // P masked-LM slots per sequence
  int rows = 0;      // R token rows: B, or fewer when packed
  std::vector<int32_t> input_ids;         // [R, S], 0-padded
  std::vector<int32_t> segment_ids;       // [R, S], 0 for sentence A, 1 for B
  // [R, S], 1 for real tokens and 0 for padding; when packed, the number (1, 2, ...) of the
  // sequence in its row (the attention's rule: kernels/softmax.h attention_visible).
  std::vector<int32_t> input_mask;
  std::vector<int32_t> masked_positions;  // [B, P], position in the sequence; unused slots 0
  std::vector<int32_t> masked_ids;        // [B, P], original token; unused slots kIgnore
  std::vector<int32_t> nsp_labels;        // [B], 1 when sentence B is random
  // Packed only, [B] each (empty otherwise): the row sequence i was put in and the position in
  // that row of its first token ([CLS]); its positions count from there.
  std::vector<int32_t> sequence_row;
  std::vector<int32_t> sequence_start;

  static constexpr int32_t kIgnore = -1;

  bool packed() const { return !sequence_row.empty(); }

  void resize(int b, int s, int p) {
    batch = b;
    seq_len = s;
    max_pred = p;
    rows = b;
    input_ids.assign(size_t(b) * s, 0);
    segment_ids.assign(size_t(b) * s, 0);
    input_mask.assign(size_t(b) * s, 0);
    masked_positions.assign(size_t(b) * p, 0);
    masked_ids.assign(size_t(b) * p, kIgnore);
    nsp_labels.assign(size_t(b), 0);
    sequence_row.clear();
    sequence_start.clear();
  }
};

}  // namespace lansbert
