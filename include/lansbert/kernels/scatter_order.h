// The order in which a scatter-add gradient (embedding and gather backward: dst[index[i]] +=
// src[i]) sums, shared by the CPU twin (src/cpu/cpu_gather.cc) and the CUDA kernels
// (cuda/cuda_gather.cu), so both give the same bits whatever the thread count.
//
// Sort the n entries by destination row, stably (ascending source position within a row):
// entry j of the sorted order has absolute index j. A row's entries form the run [s, e).
// Cut the run into pieces at the multiples of kScatterPiece of the absolute index; sum each
// piece from zero in ascending order; then row = ((row + piece_0) + piece_1) + ...
//
// Why pieces: a row hit by many entries (a token type: B*S/2 entries; [PAD], [CLS]) would
// otherwise be one serial sum, which a GPU runs on one SM; pieces let every chunk of
// kScatterPiece sorted entries be summed by its own block, and only the few piece sums of a
// long run are added serially. Cutting at absolute multiples (not at multiples from the run's
// start) makes a GPU block's chunk and a piece the same thing.
#pragma once

#include "lansbert/core/host_device.h"

namespace lansbert::kern {

// 32: at B*S = 32K tokens pass 1 of the CUDA twin runs 1,024 blocks (enough to keep a large
// GPU's memory busy when most rows are hit once, as the word embedding's are), and a token
// type's run (16K entries) leaves 512 piece sums to add serially.
constexpr int kScatterPiece = 32;

// The end of the piece that starts at absolute index `start` of a run ending at `run_end`.
LB_HOST_DEVICE int scatter_piece_end(int start, int run_end) {
  const int boundary = (start / kScatterPiece + 1) * kScatterPiece;
  return boundary < run_end ? boundary : run_end;
}

}  // namespace lansbert::kern
