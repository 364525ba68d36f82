// The attention over packed rows (input_mask numbering the sequences of a row, data/packing.h):
// each sequence's outputs and gradients are those of the same sequence alone in a row of its
// own, with the hand-written attention and the flash one (fp64, to 1e-12); the check fails for
// a mask that lets the sequences see each other.
#include <gtest/gtest.h>

#include <vector>

#include "attention_run.h"
#include "fd.h"
#include "lansbert/backend/cpu_ops.h"

namespace lansbert {
namespace {

using testing::AttentionCase;
using testing::pack_sequences;
using testing::run_attention;

constexpr int kA = 2, kS = 40, kD = 8;
const std::vector<int> kLengths = {13, 21, 5};  // row 0 of the packed case: 39 of 40 positions

// The packed case (row 0 holds kLengths, row 1 one sequence of 17) and the same sequences each
// in a row of its own: equal q, k, v and d(ctx) at their tokens, zero d(ctx) at padding (as in
// the model, where nothing reads a padding position).
struct Cases {
  AttentionCase<double> packed{2, kA, kS, kD, {kS, 17}, 0.0f, 41}, alone{4, kA, kS, kD, {13, 21, 5, 17}, 0.0f, 42};
  // Where token t of sequence i (0..3) sits in each: row and position.
  std::vector<std::pair<int, int>> packed_at, alone_at;
  Cases() {
    pack_sequences(packed, 0, kLengths);
    const int H = kA * kD;
    int start = 0;
    for (int i = 0; i < 4; ++i) {
      const int len = i < 3 ? kLengths[i] : 17;
      for (int t = 0; t < len; ++t) {
        packed_at.emplace_back(i < 3 ? 0 : 1, i < 3 ? start + t : t);
        alone_at.emplace_back(i, t);
      }
      if (i < 3) start += len;
    }
    for (size_t n = 0; n < packed_at.size(); ++n) {
      const size_t p = size_t(packed_at[n].first) * kS + packed_at[n].second;
      const size_t a = size_t(alone_at[n].first) * kS + alone_at[n].second;
      std::copy_n(packed.qkv.begin() + p * 3 * H, 3 * H, alone.qkv.begin() + a * 3 * H);
      std::copy_n(packed.d_ctx.begin() + p * H, H, alone.d_ctx.begin() + a * H);
    }
    for (auto* c : {&packed, &alone})
      for (size_t t = 0; t < c->mask.size(); ++t)
        if (c->mask[t] == 0) std::fill_n(c->d_ctx.begin() + t * H, H, 0.0);
  }
  // max |packed - alone| over the tokens' rows of width w of x (ctx: H, d_qkv: 3H).
  double max_diff(const std::vector<double>& px, const std::vector<double>& ax, int w) const {
    double worst = 0;
    for (size_t n = 0; n < packed_at.size(); ++n) {
      const size_t p = size_t(packed_at[n].first) * kS + packed_at[n].second;
      const size_t a = size_t(alone_at[n].first) * kS + alone_at[n].second;
      for (int j = 0; j < w; ++j) worst = testing::worse(worst, std::abs(px[p * w + j] - ax[a * w + j]));
    }
    return worst;
  }
};

TEST(PackedAttention, EachSequenceComputesAsIfAlone) {
  for (AttentionMode mode : {AttentionMode::kNative, AttentionMode::kFlash}) {
    SCOPED_TRACE(attention_mode_name(mode));
    auto ops = cpu::make_ops<double>(GemmMath::kFp32, true, mode);
    Cases c;
    const auto p = run_attention(*ops, c.packed), a = run_attention(*ops, c.alone);
    const int H = kA * kD;
    EXPECT_LT(c.max_diff(p.ctx, a.ctx, H), 1e-12);
    EXPECT_LT(c.max_diff(p.d_qkv, a.d_qkv, 3 * H), 1e-12);
    // The padding position's gradient is zero: nothing reads it, nothing it sees moves.
    for (int j = 0; j < 3 * H; ++j) EXPECT_EQ(p.d_qkv[size_t(39) * 3 * H + j], 0.0);
    // A mask of ones over the packed row (the sequences see each other) is far off.
    Cases leaky;
    for (int t = 0; t < 39; ++t) leaky.packed.mask[t] = 1;
    const auto l = run_attention(*ops, leaky.packed);
    EXPECT_GT(leaky.max_diff(l.ctx, a.ctx, H), 1e-2);
  }
}

}  // namespace
}  // namespace lansbert
