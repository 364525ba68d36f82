// Batch: one micro-batch of pretraining instances as the model consumes it, in host memory.
// The data layer fills it (from our shards or NVIDIA's HDF5 files); the model copies it to
// its device once per step.
#pragma once

#include <cstdint>
#include <vector>

namespace lansbert {

struct Batch {
  int batch = 0;     // B sequences
  int seq_len = 0;   // S tokens per sequence
  int max_pred = 0;  // P masked-LM slots per sequence
  std::vector<int32_t> input_ids;         // [B, S], 0-padded
  std::vector<int32_t> segment_ids;       // [B, S], 0 for sentence A, 1 for B
  std::vector<int32_t> input_mask;        // [B, S], 1 for real tokens
  std::vector<int32_t> masked_positions;  // [B, P], position in the sequence; unused slots 0
  std::vector<int32_t> masked_ids;        // [B, P], original token; unused slots kIgnore
  std::vector<int32_t> nsp_labels;        // [B], 1 when sentence B is random

  static constexpr int32_t kIgnore = -1;

  void resize(int b, int s, int p) {
    batch = b;
    seq_len = s;
    max_pred = p;
    input_ids.assign(size_t(b) * s, 0);
    segment_ids.assign(size_t(b) * s, 0);
    input_mask.assign(size_t(b) * s, 0);
    masked_positions.assign(size_t(b) * p, 0);
    masked_ids.assign(size_t(b) * p, kIgnore);
    nsp_labels.assign(size_t(b), 0);
  }
};

}  // namespace lansbert
