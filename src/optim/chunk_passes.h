// The loop skeletons the CPU rules (lans.cc, lamb.cc) share: a parallel loop over the chunks
// of a plan, the first pass (gradient and parameter norms), and the finishing of per-chunk
// partials into per-block sums (summed over the ranks of a sharded update).
// Every sum is assembled in chunk order from per-chunk slots, so results do not depend on
// the thread count. Private to src/optim.
#pragma once

#include <cmath>
#include <cstdint>
#include <vector>

#include "chunk_plan.h"
#include "lansbert/kernels/half.h"
#include "lansbert/optim/optimizer.h"

namespace lansbert {

// body(i, chunk) for every chunk i of the plan, over OpenMP threads (dynamic schedule, since
// a block's last chunk is short). A call writes only chunk i's own slots.
// Vectorising bodies copy what they capture by reference (constants, scalars, per-block
// factors) into locals before their element loops: GCC cannot prove that the stores of the
// loop do not alias a value read through the closure, reloads it on every element and gives
// up on SIMD (2-3x slower updates, measured with build/tests/bench_optim).
template <typename Body>
void for_each_chunk(const ChunkPlan& plan, const Body& body) {
  const std::vector<Chunk>& chunks = plan.chunks();
  const int64_t n = static_cast<int64_t>(chunks.size());
#pragma omp parallel for schedule(dynamic, 4)
  for (int64_t i = 0; i < n; ++i) body(static_cast<size_t>(i), chunks[i]);
}

// Elements per stack tile of directions (1 KiB per stream): the rules' moments passes write
// a tile of directions, then add its squares in double (sum_squares, add_sum_squares).
constexpr size_t kDirectionTile = 256;

// The 16-bit weight copy of a chunk the apply pass has just updated (FlatBuffers::half_params),
// written while the chunk is in cache; a separate loop keeps the update loop vectorised.
inline void write_half_copy(const FlatBuffers& buf, const Chunk& ch) {
  if (!buf.half_params) return;
  const kern::HalfFormat f = buf.half_format;
  const float* __restrict p = buf.params;
  uint16_t* __restrict h = buf.half_params;
  kern::with_half_format(f, [&](auto F) {
    for (size_t i = ch.begin; i < ch.end; ++i) h[i] = kern::float_to_half(p[i], F);
  });
}

// *sa += sum of a[0..n)^2, *sb += sum of b[0..n)^2, in the fixed order of sum_squares2.
inline void add_sum_squares(const float* a, const float* b, size_t n, double* sa, double* sb) {
  double x, y;
  sum_squares2(a, b, n, &x, &y);
  *sa += x;
  *sb += y;
}

// sums[b*K + k] = the sum over block b's chunks, in order, of partial[c*K + k], then summed
// over the ranks when the update is sharded.
inline void finish_block_sums(const ChunkPlan& plan, const std::vector<double>& partial, int K,
                              const ShardSpec& shard, std::vector<double>* sums) {
  plan.sum_by_block(partial, K, sums);
  if (shard.reduce_sums) shard.reduce_sums(sums->data(), sums->size());
}

// Pass 1 of every rule, before anything is modified: per-block sums of g^2, and of p^2 too
// when want_params (then K = 2 values per block, g first), into *sums. Returns the global
// gradient norm G, the blocks added in table order.
inline double gradient_norms(const ChunkPlan& plan, const FlatBuffers& buf, bool want_params,
                             const ShardSpec& shard, std::vector<double>* partial,
                             std::vector<double>* sums) {
  const int K = want_params ? 2 : 1;
  partial->assign(plan.chunks().size() * K, 0.0);
  double* out = partial->data();
  for_each_chunk(plan, [&](size_t i, const Chunk& ch) {
    if (want_params)
      sum_squares2(buf.grads + ch.begin, buf.params + ch.begin, ch.end - ch.begin, &out[2 * i],
                   &out[2 * i + 1]);
    else
      out[i] = sum_squares(buf.grads + ch.begin, ch.end - ch.begin);
  });
  finish_block_sums(plan, *partial, K, shard, sums);
  double g2 = 0;
  for (size_t b = 0; b < plan.blocks(); ++b) g2 += (*sums)[b * K];
  return std::sqrt(g2);
}

}  // namespace lansbert
